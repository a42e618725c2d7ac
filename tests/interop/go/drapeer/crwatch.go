// -watch-resource GROUP/VERSION/RESOURCE: a reflector over one resource
// (a custom resource, read as client-go's dynamic client reads it: JSON),
// written from the documented behaviour of client-go's
// tools/cache.Reflector (ListAndWatch), since client-go is not packaged for
// Debian's Go. It lists (resourceVersion "0" the first time, then the last
// version it saw, then "" once that is gone), watches from the list's
// resourceVersion with allowWatchBookmarks and a timeoutSeconds of 5 to 10
// minutes (-watch-timeout sets it), watches again from the last version seen
// when a watch ends cleanly, and lists again when a watch answers 410
// (Expired or Gone). It prints one line per event:
//
//	LISTED name rv      each object of a list
//	SYNCED rv           a list is done
//	ADDED|MODIFIED|DELETED name rv
//	REWATCH rv          a watch ended cleanly; the next starts from rv
//	RELIST reason: msg  a watch or list was answered 410
//	DROPPED rv          "drop" was read on stdin: the watch was closed as a
//	                    lost connection is, and the reflector waits for the
//	                    next stdin line before it watches again from rv
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

var (
	watchResource  = flag.String("watch-resource", "", "GROUP/VERSION/RESOURCE (VERSION/RESOURCE for the core group): reflect it instead of serving a driver")
	watchNamespace = flag.String("namespace", "", "with -watch-resource: the namespace (all when empty)")
	watchTimeout   = flag.Int("watch-timeout", 0, "with -watch-resource: each watch's timeoutSeconds (client-go's 5-10 min when 0)")
)

// meta is the part of an object, a list or a Status the reflector reads.
type meta struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type list struct {
	meta
	Items []meta `json:"items"`
}

// gone is a 410 answer: the version asked for is no longer kept.
type gone struct{ reason, message string }

func (g *gone) Error() string { return g.reason + ": " + g.message }

// dropped: the watch was closed on purpose ("drop" on stdin).
var dropped = errors.New("dropped")

// statusError reads a Status answer as client-go's apierrors.FromObject does.
func statusError(st meta) error {
	if st.Code == 410 || st.Reason == "Expired" || st.Reason == "Gone" {
		return &gone{st.Reason, st.Message}
	}
	return fmt.Errorf("%s (%d): %s", st.Reason, st.Code, st.Message)
}

// resourcePath is the collection's path for a GROUP/VERSION/RESOURCE.
func resourcePath(gvr, ns string) string {
	parts := strings.Split(gvr, "/")
	var base string
	switch len(parts) {
	case 2:
		base = "/api/" + parts[0]
	case 3:
		base = "/apis/" + parts[0] + "/" + parts[1]
	default:
		die("-watch-resource %q: not GROUP/VERSION/RESOURCE", gvr)
	}
	if ns != "" {
		base += "/namespaces/" + ns
	}
	return base + "/" + parts[len(parts)-1]
}

// get sends one GET as the dynamic client does (JSON) under ctx.
func get(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", server+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	authorize(req)
	return http.DefaultClient.Do(req)
}

func listAt(path, rv string) (list, error) {
	var l list
	q := url.Values{}
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	resp, err := get(context.Background(), path, q)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return l, fmt.Errorf("list: %d: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != 200 {
		return l, statusError(l.meta)
	}
	return l, nil
}

// watchFrom follows one watch from *rv until it ends (nil: cleanly), is
// answered with an error, or "drop" arrives on control.
func watchFrom(path string, rv *string, control <-chan string) error {
	secs := *watchTimeout
	if secs <= 0 {
		secs = int(300 * (rand.Float64() + 1.0))
	}
	q := url.Values{}
	q.Set("watch", "true")
	q.Set("resourceVersion", *rv)
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", fmt.Sprint(secs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := get(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var st meta
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return fmt.Errorf("watch: %d: %v", resp.StatusCode, err)
		}
		return statusError(st)
	}
	// "drop" on stdin closes the watch; a line read as the watch ended
	// otherwise drops it all the same (the reflector then waits for the next).
	wasDropped := make(chan bool, 1)
	go func() {
		select {
		case <-control:
			wasDropped <- true
			cancel()
		case <-ctx.Done():
			wasDropped <- false
		}
	}()
	finish := func(err error) error {
		cancel()
		if <-wasDropped {
			return dropped
		}
		return err
	}
	start := time.Now()
	events := 0
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string `json:"type"`
			Object meta   `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if !errors.Is(err, io.EOF) {
				return finish(fmt.Errorf("watch: %v", err))
			}
			// As the reflector: a watch that ends within a second having sent nothing is an error.
			if events == 0 && time.Since(start) < time.Second {
				return finish(fmt.Errorf("very short watch: ended within a second, no events"))
			}
			return finish(nil)
		}
		events++
		switch ev.Type {
		case "ERROR":
			return finish(statusError(ev.Object))
		case "ADDED", "MODIFIED", "DELETED":
			fmt.Printf("%s %s %s\n", ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.ResourceVersion)
		case "BOOKMARK":
		default:
			return finish(fmt.Errorf("watch: event type %q", ev.Type))
		}
		*rv = ev.Object.Metadata.ResourceVersion
	}
}

// reflectResource lists and watches the resource until the process ends.
func reflectResource(gvr, ns string) {
	path := resourcePath(gvr, ns)
	control := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			control <- strings.TrimSpace(in.Text())
		}
	}()
	lastRV, unavailable := "", false
	for {
		rv := lastRV
		if unavailable {
			rv = ""
		} else if rv == "" {
			rv = "0"
		}
		l, err := listAt(path, rv)
		var g *gone
		if errors.As(err, &g) {
			fmt.Printf("RELIST %v\n", g)
			unavailable = true
			continue
		}
		if err != nil {
			die("list %s: %v", path, err)
		}
		unavailable = false
		for _, o := range l.Items {
			fmt.Printf("LISTED %s %s\n", o.Metadata.Name, o.Metadata.ResourceVersion)
		}
		lastRV = l.Metadata.ResourceVersion
		fmt.Printf("SYNCED %s\n", lastRV)
		for {
			err := watchFrom(path, &lastRV, control)
			if err == nil {
				fmt.Printf("REWATCH %s\n", lastRV)
				continue
			}
			if errors.Is(err, dropped) {
				fmt.Printf("DROPPED %s\n", lastRV)
				<-control
				continue
			}
			if errors.As(err, &g) {
				// As the reflector: list again from the last version seen (a 410 there lists from "").
				fmt.Printf("RELIST %v\n", g)
				break
			}
			die("watch %s: %v", path, err)
		}
	}
}

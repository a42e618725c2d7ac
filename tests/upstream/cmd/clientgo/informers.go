package main

// informers: client-go's own informers against an API server, as every
// controller and driver runs them: a SharedInformerFactory
// (k8s.io/client-go/informers) for ResourceSlices and ResourceClaims, and a
// dynamic informer (k8s.io/client-go/dynamic/dynamicinformer) for a custom
// resource. Each Add/Update/Delete is one JSON line on stdout:
//
//	{"informer":"resourceclaims","event":"ADDED","namespace":"ml","name":"gpu","rv":"7","allocated":false}
//
// then {"synced":true} once every informer's cache has synced, and one
// line per request client-go sent ({"request":...,"query":...,"code":...}).
// Lines on stdin steer it:
//
//	create NAME          create the custom resource NAME (spec.numNodes 1) with a second client
//	patch NAME N         merge-patch its spec.numNodes to N
//	patch-many NAME K    K such patches, one after the other
//	delete NAME          delete it
//	drop                 close the informers' open watches and hold their next requests
//	resume               let them through again
//
// "drop" and "resume" make a lost connection: the reflectors watch again
// from the last version they saw, which the API server may no longer keep
// (410 Expired: they list again). The writer's client is not held.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// gate holds the informers' requests while the connection is "lost".
type gate struct {
	next   http.RoundTripper
	mu     sync.Mutex
	held   bool
	open   chan struct{}
	bodies map[*gatedBody]struct{}
}

type gatedBody struct {
	io.ReadCloser
	g *gate
}

func (b *gatedBody) Close() error {
	b.g.mu.Lock()
	delete(b.g.bodies, b)
	b.g.mu.Unlock()
	return b.ReadCloser.Close()
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	held, open := g.held, g.open
	g.mu.Unlock()
	if held {
		select {
		case <-open:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	resp, err := g.next.RoundTrip(r)
	if err == nil && r.URL.Query().Get("watch") == "true" {
		b := &gatedBody{ReadCloser: resp.Body, g: g}
		g.mu.Lock()
		g.bodies[b] = struct{}{}
		g.mu.Unlock()
		resp.Body = b
	}
	return resp, err
}

// drop closes every open watch and holds what comes next; the number closed.
func (g *gate) drop() int {
	g.mu.Lock()
	g.held, g.open = true, make(chan struct{})
	var open []*gatedBody
	for b := range g.bodies {
		open = append(open, b)
	}
	g.mu.Unlock()
	for _, b := range open {
		_ = b.Close()
	}
	return len(open)
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.open)
	}
}

func runInformers(args []string) {
	fs := flag.NewFlagSet("informers", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (as every driver loads it: clientcmd)")
	jsonOnly := fs.Bool("json", false, "the typed informers talk JSON (client-go's generated clients default to protobuf; custom resources are always JSON)")
	resource := fs.String("resource", "", "GROUP/VERSION/RESOURCE of a custom resource for a dynamic informer (none when empty)")
	namespace := fs.String("namespace", "", "the dynamic informer's namespace (all when empty)")
	watchTimeout := fs.Int64("watch-timeout", 0, "each watch's timeoutSeconds (client-go's own 5-10 min when 0)")
	_ = fs.Parse(args)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig", err)
	}
	writerCfg := rest.CopyConfig(cfg)
	// The writer patches a thousand times in a row: no client-side rate limit (5 QPS by default).
	writerCfg.QPS, writerCfg.Burst = 10000, 10000
	g := &gate{bodies: map[*gatedBody]struct{}{}, open: make(chan struct{})}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return sniff{rt} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g })
	typedCfg := rest.CopyConfig(cfg)
	if *jsonOnly {
		typedCfg.ContentType = "application/json"
		typedCfg.AcceptContentTypes = "application/json"
	}
	emit(map[string]any{"step": "config", "host": cfg.Host, "bearer": cfg.BearerToken != "", "ca": len(cfg.CAData) > 0 || cfg.CAFile != ""})
	cs, err := kubernetes.NewForConfig(typedCfg)
	if err != nil {
		fail("client", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fail("dynamic client", err)
	}
	writer, err := dynamic.NewForConfig(writerCfg)
	if err != nil {
		fail("writer client", err)
	}
	// The reflector asks every watch (and only watches) for bookmarks; the
	// client sets Watch itself after this tweak.
	tweak := func(o *metav1.ListOptions) {
		if *watchTimeout > 0 && o.AllowWatchBookmarks {
			t := *watchTimeout
			o.TimeoutSeconds = &t
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(tweak))
	var synced []cache.InformerSynced
	add := func(name string, inf cache.SharedIndexInformer) {
		if _, err := inf.AddEventHandler(handler(name)); err != nil {
			fail("handler "+name, err)
		}
		synced = append(synced, inf.HasSynced)
	}
	add("resourceslices", factory.Resource().V1().ResourceSlices().Informer())
	add("resourceclaims", factory.Resource().V1().ResourceClaims().Informer())
	var gvr schema.GroupVersionResource
	if *resource != "" {
		parts := strings.Split(*resource, "/")
		if len(parts) != 3 {
			fail("resource", fmt.Errorf("-resource %q: want GROUP/VERSION/RESOURCE", *resource))
		}
		gvr = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, *namespace, tweak)
		add(gvr.Resource, df.ForResource(gvr).Informer())
		df.Start(ctx.Done())
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		fail("sync", fmt.Errorf("the caches did not sync"))
	}
	emit(map[string]any{"synced": true})

	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			w := strings.Fields(in.Text())
			if err := command(ctx, w, writer, gvr, *namespace, g); err != nil {
				emit(map[string]any{"command": in.Text(), "error": err.Error()})
			} else {
				emit(map[string]any{"command": in.Text(), "done": true})
			}
		}
	}()
	<-ctx.Done()
	factory.Shutdown()
	emit(map[string]any{"step": "stopped"})
}

func command(ctx context.Context, w []string, writer dynamic.Interface, gvr schema.GroupVersionResource, ns string, g *gate) error {
	res := writer.Resource(gvr).Namespace(ns)
	patch := func(name string, n int) error {
		body := fmt.Sprintf(`{"spec":{"numNodes":%d}}`, n)
		_, err := res.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	switch {
	case len(w) == 1 && w[0] == "drop":
		emit(map[string]any{"dropped": g.drop()})
		return nil
	case len(w) == 1 && w[0] == "resume":
		g.resume()
		return nil
	case len(w) == 2 && w[0] == "create":
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "ComputeDomain",
			"metadata": map[string]any{"name": w[1], "namespace": ns},
			"spec":     map[string]any{"numNodes": int64(1)},
		}}
		_, err := res.Create(ctx, obj, metav1.CreateOptions{})
		return err
	case len(w) == 3 && (w[0] == "patch" || w[0] == "patch-many"):
		n, err := strconv.Atoi(w[2])
		if err != nil {
			return err
		}
		if w[0] == "patch" {
			return patch(w[1], n)
		}
		for i := 0; i < n; i++ {
			if err := patch(w[1], i+2); err != nil {
				return err
			}
		}
		return nil
	case len(w) == 2 && w[0] == "delete":
		return res.Delete(ctx, w[1], metav1.DeleteOptions{})
	}
	return fmt.Errorf("unknown command")
}

// handler prints each event of the informer `name`.
func handler(name string) cache.ResourceEventHandlerFuncs {
	line := func(event string, obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
			event += "_UNKNOWN"
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			emit(map[string]any{"informer": name, "event": event, "error": err.Error()})
			return
		}
		v := map[string]any{"informer": name, "event": event, "namespace": m.GetNamespace(), "name": m.GetName(),
			"rv": m.GetResourceVersion(), "uid": string(m.GetUID()), "type": fmt.Sprintf("%T", obj), "at": time.Now().Format(time.RFC3339Nano)}
		switch o := obj.(type) {
		case *resourcev1.ResourceClaim:
			v["allocated"] = o.Status.Allocation != nil
		case *resourcev1.ResourceSlice:
			v["devices"] = len(o.Spec.Devices)
			v["driver"] = o.Spec.Driver
		case *unstructured.Unstructured:
			n, _, _ := unstructured.NestedInt64(o.Object, "spec", "numNodes")
			v["numNodes"] = n
		}
		emit(v)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { line("ADDED", obj) },
		UpdateFunc: func(_, obj any) { line("UPDATED", obj) },
		DeleteFunc: func(obj any) { line("DELETED", obj) },
	}
}

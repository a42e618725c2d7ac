// Command clientgo is real client-go (k8s.io/client-go, the version pinned in
// go.mod) as a peer of dpctl's local API server: it loads a kubeconfig exactly
// as every driver does (clientcmd), so it sends a bearer token only over TLS
// (client_config.go: "only try to read the auth information if we are
// secure"), and it talks JSON or Kubernetes protobuf as client-go negotiates.
//
//	clientgo crud -kubeconfig FILE [-protobuf] [-node NAME] [-driver NAME]
//
// crud asks the server's version, lists ResourceSlices, watches them, and
// creates (generateName), gets, updates and deletes one slice of its own,
// waiting for each change on the watch. Every step is one JSON line on
// stdout ({"step":..., ...}); the first failure is {"step":..., "error":...}
// and exit 1. Each request's line says whether client-go sent credentials.
//
//	clientgo informers -kubeconfig FILE [-json] [-resource G/V/R] [-namespace NS] [-watch-timeout N]
//
// informers runs client-go's informers: a SharedInformerFactory for
// ResourceSlices and ResourceClaims and a dynamic informer for -resource
// (see informers.go).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func fail(step string, err error) {
	emit(map[string]any{"step": step, "error": err.Error()})
	os.Exit(1)
}

// sniff reports, for every request client-go sends, its method, path and
// whether it carries an Authorization header (never the header itself).
type sniff struct{ next http.RoundTripper }

func (s sniff) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	emit(map[string]any{"request": r.Method + " " + r.URL.Path, "query": r.URL.RawQuery, "scheme": r.URL.Scheme, "accept": r.Header.Get("Accept"),
		"authorization": r.Header.Get("Authorization") != "", "code": code})
	return resp, err
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "informers" {
		runInformers(os.Args[2:])
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "crud" {
		fmt.Fprintln(os.Stderr, "usage: clientgo crud -kubeconfig FILE [-protobuf] [-node NAME] [-driver NAME]\n"+
			"       clientgo informers -kubeconfig FILE [-json] [-resource GROUP/VERSION/RESOURCE] [-namespace NS] [-watch-timeout N]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("crud", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (as every driver loads it: clientcmd)")
	protobuf := fs.Bool("protobuf", false, "talk Kubernetes protobuf (as the kubeletplugin helper does)")
	node := fs.String("node", "dpctl-node", "the slice's nodeName")
	driver := fs.String("driver", "clientgo.example.com", "the slice's driver")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	_ = fs.Parse(os.Args[2:])

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig", err)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return sniff{rt} })
	if *protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	emit(map[string]any{"step": "config", "host": cfg.Host, "bearer": cfg.BearerToken != "", "ca": len(cfg.CAData) > 0 || cfg.CAFile != ""})
	run(cfg, *node, *driver, *timeout)
}

func run(cfg *rest.Config, node, driver string, timeout time.Duration) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("client", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		fail("version", err)
	}
	emit(map[string]any{"step": "version", "gitVersion": v.GitVersion})

	slices := cs.ResourceV1().ResourceSlices()
	list, err := slices.List(ctx, metav1.ListOptions{})
	if err != nil {
		fail("list", err)
	}
	emit(map[string]any{"step": "list", "items": len(list.Items), "resourceVersion": list.ResourceVersion})
	w, err := slices.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		fail("watch", err)
	}
	defer w.Stop()
	await := func(step string, want watch.EventType, name string) {
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					fail(step, fmt.Errorf("the watch ended before %s of %s", want, name))
				}
				s, isSlice := ev.Object.(*resourcev1.ResourceSlice)
				if ev.Type == watch.Error || !isSlice {
					fail(step, fmt.Errorf("watch event %s: %v", ev.Type, ev.Object))
				}
				if ev.Type == want && s.Name == name {
					emit(map[string]any{"step": step, "event": string(ev.Type), "name": name})
					return
				}
			case <-ctx.Done():
				fail(step, fmt.Errorf("no %s event for %s: %w", want, name, ctx.Err()))
			}
		}
	}

	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-" + driver + "-"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: &node,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourcev1.Device{{Name: "dev-0"}},
		},
	}
	created, err := slices.Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		fail("create", err)
	}
	emit(map[string]any{"step": "create", "name": created.Name, "uid": string(created.UID)})
	await("watch-added", watch.Added, created.Name)
	got, err := slices.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		fail("get", err)
	}
	got.Spec.Devices = append(got.Spec.Devices, resourcev1.Device{Name: "dev-1"})
	updated, err := slices.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		fail("update", err)
	}
	emit(map[string]any{"step": "update", "devices": len(updated.Spec.Devices), "generation": updated.Generation})
	await("watch-modified", watch.Modified, created.Name)
	if err := slices.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		fail("delete", err)
	}
	emit(map[string]any{"step": "delete", "name": created.Name})
	await("watch-deleted", watch.Deleted, created.Name)
	emit(map[string]any{"step": "done"})
}

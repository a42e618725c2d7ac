// Command podsclient is a node agent reading the kubelet's pods API with
// upstream's generated client (k8s.io/kubelet/pkg/apis/pods/v1alpha1) and
// upstream's Pod type: `podsclient SOCKET [UID]` prints, as JSON lines,
// ListPods' pods, GetPod(UID)'s pod (or its gRPC status) and WatchPods'
// events up to INITIAL_SYNC_COMPLETE, each pod decoded with v1.Pod.Unmarshal
// (the decoding the API documents). A pod that does not decode is an error.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

func pod(b []byte) *v1.Pod {
	if len(b) == 0 {
		return nil
	}
	var p v1.Pod
	if err := p.Unmarshal(b); err != nil {
		fail(fmt.Errorf("v1.Pod.Unmarshal: %w", err))
	}
	return &p
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "podsclient:", err)
	os.Exit(1)
}

func out(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(b))
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: podsclient SOCKET [UID]"))
	}
	conn, err := grpc.NewClient("unix://"+os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	c := podsv1alpha1.NewPodsClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	list, err := c.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	if err != nil {
		fail(fmt.Errorf("ListPods: %w", err))
	}
	for _, b := range list.Pods {
		out(map[string]any{"call": "ListPods", "pod": pod(b)})
	}
	if len(os.Args) > 2 {
		got, err := c.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: os.Args[2]})
		if err != nil {
			s, _ := status.FromError(err)
			out(map[string]any{"call": "GetPod", "code": s.Code().String(), "message": s.Message()})
		} else {
			out(map[string]any{"call": "GetPod", "pod": pod(got.Pod)})
		}
	}
	w, err := c.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		fail(fmt.Errorf("WatchPods: %w", err))
	}
	for {
		e, err := w.Recv()
		if err != nil {
			fail(fmt.Errorf("WatchPods: %w", err))
		}
		out(map[string]any{"call": "WatchPods", "type": e.Type.String(), "pod": pod(e.Pod)})
		if e.Type == podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE {
			return
		}
	}
}

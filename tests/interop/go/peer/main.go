// Interop peer written with grpc-go: an independent implementation of the
// device-plugin protocol roles, driven by dpctl's interop tests. Same
// command line and JSON-lines events as tests/interop/python/peer.py.
//
//	peer plugin --socket PATH --resource R [--kubelet-socket K] [--devices N]
//	            [--preferred] [--prestart] [--fail CODE:MSG] [--close-after N]
//	peer kubelet --dir DIR
//	peer podresources --socket PATH
//	peer podresources-client --socket PATH
//	peer bench --socket PATH [--concurrency N] [--duration D | --requests N]
//	           [--authority localhost|path]
//
// Built in GOPATH mode (GO111MODULE=off) against Debian's grpc-go; the
// k8s.io/kubelet/... packages are generated from dpctl's proto/ by setup.sh.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	dp "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	pr "k8s.io/kubelet/pkg/apis/podresources/v1"
)

var outMu sync.Mutex

func emit(ev map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	b, _ := json.Marshal(ev)
	fmt.Println(string(b))
}

func parseList(s string) []string {
	if s == "" || s == "-" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// --- plugin -------------------------------------------------------------------

type plugin struct {
	dp.UnimplementedDevicePluginServer
	preferred, prestart bool
	fail                string
	closeAfter          int
	mu                  sync.Mutex
	devices             []*dp.Device
	changed             chan struct{}
}

func (p *plugin) snapshot() ([]*dp.Device, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*dp.Device, len(p.devices))
	for i, d := range p.devices {
		out[i] = &dp.Device{ID: d.ID, Health: d.Health, Topology: d.Topology}
	}
	return out, p.changed
}

func (p *plugin) setHealth(id, health string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.devices {
		if d.ID == id {
			d.Health = health
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *plugin) GetDevicePluginOptions(ctx context.Context, e *dp.Empty) (*dp.DevicePluginOptions, error) {
	emit(map[string]interface{}{"event": "call", "method": "GetDevicePluginOptions"})
	return &dp.DevicePluginOptions{PreStartRequired: p.prestart, GetPreferredAllocationAvailable: p.preferred}, nil
}

func (p *plugin) ListAndWatch(e *dp.Empty, s dp.DevicePlugin_ListAndWatchServer) error {
	emit(map[string]interface{}{"event": "call", "method": "ListAndWatch"})
	sent := 0
	for {
		devices, changed := p.snapshot()
		if err := s.Send(&dp.ListAndWatchResponse{Devices: devices}); err != nil {
			return err
		}
		sent++
		if p.closeAfter > 0 && sent >= p.closeAfter {
			return nil
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *plugin) GetPreferredAllocation(ctx context.Context, r *dp.PreferredAllocationRequest) (*dp.PreferredAllocationResponse, error) {
	out := &dp.PreferredAllocationResponse{}
	for _, c := range r.ContainerRequests {
		emit(map[string]interface{}{"event": "call", "method": "GetPreferredAllocation", "available": c.AvailableDeviceIDs,
			"mustInclude": c.MustIncludeDeviceIDs, "size": c.AllocationSize})
		ids := append([]string{}, c.MustIncludeDeviceIDs...)
		for _, a := range c.AvailableDeviceIDs {
			if int32(len(ids)) >= c.AllocationSize {
				break
			}
			dup := false
			for _, x := range ids {
				dup = dup || x == a
			}
			if !dup {
				ids = append(ids, a)
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &dp.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

func (p *plugin) Allocate(ctx context.Context, r *dp.AllocateRequest) (*dp.AllocateResponse, error) {
	ids := [][]string{}
	for _, c := range r.ContainerRequests {
		ids = append(ids, c.DevicesIds)
	}
	emit(map[string]interface{}{"event": "call", "method": "Allocate", "ids": ids})
	if p.fail != "" {
		parts := strings.SplitN(p.fail, ":", 2)
		var code codes.Code
		if err := code.UnmarshalJSON([]byte(strconv.Quote(parts[0]))); err != nil {
			code = codes.Unknown
		}
		return nil, status.Error(code, parts[1])
	}
	out := &dp.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		resp := &dp.ContainerAllocateResponse{
			Envs:        map[string]string{"PEER_DEVICES": strings.Join(c.DevicesIds, ",")},
			Annotations: map[string]string{"peer": "go"},
			Mounts:      []*dp.Mount{{ContainerPath: "/peer", HostPath: "/tmp", ReadOnly: true}},
		}
		for _, d := range c.DevicesIds {
			resp.Devices = append(resp.Devices, &dp.DeviceSpec{ContainerPath: "/dev/" + d, HostPath: "/dev/null", Permissions: "rw"})
			resp.CdiDevices = append(resp.CdiDevices, &dp.CDIDevice{Name: "vendor.example/peer=" + d})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *plugin) PreStartContainer(ctx context.Context, r *dp.PreStartContainerRequest) (*dp.PreStartContainerResponse, error) {
	emit(map[string]interface{}{"event": "call", "method": "PreStartContainer", "ids": r.DevicesIds})
	return &dp.PreStartContainerResponse{}, nil
}

func unixDialer(ctx context.Context, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, "unix", addr)
}

func runPlugin(args []string) {
	fs := flag.NewFlagSet("plugin", flag.ExitOnError)
	socket := fs.String("socket", "", "")
	resource := fs.String("resource", "vendor.example/peer", "")
	kubelet := fs.String("kubelet-socket", "", "")
	n := fs.Int("devices", 4, "")
	p := &plugin{changed: make(chan struct{})}
	fs.BoolVar(&p.preferred, "preferred", false, "")
	fs.BoolVar(&p.prestart, "prestart", false, "")
	fs.StringVar(&p.fail, "fail", "", "")
	fs.IntVar(&p.closeAfter, "close-after", 0, "")
	fs.Parse(args)
	for i := 0; i < *n; i++ {
		p.devices = append(p.devices, &dp.Device{ID: fmt.Sprintf("p-%d", i), Health: "Healthy",
			Topology: &dp.TopologyInfo{Nodes: []*dp.NUMANode{{ID: int64(i * 2 / *n)}}}})
	}
	lis, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	dp.RegisterDevicePluginServer(s, p)
	go s.Serve(lis)
	if *kubelet != "" {
		// Like many real plugins: the bare socket path as target and a context
		// dialer, which makes grpc-go 1.33 send the path as :authority.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		conn, err := grpc.DialContext(ctx, *kubelet, grpc.WithInsecure(), grpc.WithBlock(), grpc.WithContextDialer(unixDialer))
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial kubelet:", err)
			os.Exit(1)
		}
		_, err = dp.NewRegistrationClient(conn).Register(ctx, &dp.RegisterRequest{Version: "v1beta1", Endpoint: filepath.Base(*socket),
			ResourceName: *resource, Options: &dp.DevicePluginOptions{PreStartRequired: p.prestart, GetPreferredAllocationAvailable: p.preferred}})
		cancel()
		conn.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "register:", err)
			os.Exit(1)
		}
		emit(map[string]interface{}{"event": "registered"})
	}
	emit(map[string]interface{}{"event": "ready"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "health" {
			p.setHealth(f[1], f[2])
			emit(map[string]interface{}{"event": "health", "id": f[1], "health": f[2]})
		}
	}
	s.Stop()
}

// --- kubelet ------------------------------------------------------------------

type kubelet struct {
	dp.UnimplementedRegistrationServer
	dir    string
	mu     sync.Mutex
	client dp.DevicePluginClient
}

func (k *kubelet) Register(ctx context.Context, r *dp.RegisterRequest) (*dp.Empty, error) {
	opts := map[string]interface{}{}
	if r.Options != nil {
		opts = map[string]interface{}{"preStartRequired": r.Options.PreStartRequired, "getPreferredAllocationAvailable": r.Options.GetPreferredAllocationAvailable}
	}
	emit(map[string]interface{}{"event": "register", "resource": r.ResourceName, "endpoint": r.Endpoint, "version": r.Version, "options": opts})
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As the kubelet does: authority "localhost", blocking dial.
	conn, err := grpc.DialContext(dctx, filepath.Join(k.dir, r.Endpoint), grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithAuthority("localhost"), grpc.WithContextDialer(unixDialer))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %v", err)
	}
	c := dp.NewDevicePluginClient(conn)
	o, err := c.GetDevicePluginOptions(dctx, &dp.Empty{})
	if err != nil {
		return nil, fmt.Errorf("failed to get device plugin options: %v", err)
	}
	emit(map[string]interface{}{"event": "options", "preStartRequired": o.PreStartRequired, "getPreferredAllocationAvailable": o.GetPreferredAllocationAvailable})
	k.mu.Lock()
	k.client = c
	k.mu.Unlock()
	go func() {
		s, err := c.ListAndWatch(context.Background(), &dp.Empty{})
		if err != nil {
			emit(map[string]interface{}{"event": "stream-ended", "code": status.Code(err).String()})
			return
		}
		for {
			resp, err := s.Recv()
			if err != nil {
				emit(map[string]interface{}{"event": "stream-ended", "code": status.Code(err).String()})
				return
			}
			devs := []map[string]interface{}{}
			for _, d := range resp.Devices {
				numa := []int64{}
				if d.Topology != nil {
					for _, n := range d.Topology.Nodes {
						numa = append(numa, n.ID)
					}
				}
				devs = append(devs, map[string]interface{}{"id": d.ID, "health": d.Health, "numa": numa})
			}
			emit(map[string]interface{}{"event": "snapshot", "devices": devs})
		}
	}()
	return &dp.Empty{}, nil
}

func deleteSockets(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(p)
		}
	}
}

func startKubelet(k *kubelet) *grpc.Server {
	lis, err := net.Listen("unix", filepath.Join(k.dir, "kubelet.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	dp.RegisterRegistrationServer(s, k)
	go s.Serve(lis)
	return s
}

func rpcError(err error) {
	st, _ := status.FromError(err)
	emit(map[string]interface{}{"event": "error", "code": st.Code().String(), "message": st.Message()})
}

func runKubelet(args []string) {
	fs := flag.NewFlagSet("kubelet", flag.ExitOnError)
	dir := fs.String("dir", "", "")
	fs.Parse(args)
	k := &kubelet{dir: *dir}
	deleteSockets(*dir)
	s := startKubelet(k)
	emit(map[string]interface{}{"event": "ready"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		k.mu.Lock()
		c := k.client
		k.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		switch f[0] {
		case "allocate":
			r, err := c.Allocate(ctx, &dp.AllocateRequest{ContainerRequests: []*dp.ContainerAllocateRequest{{DevicesIds: parseList(f[1])}}})
			if err != nil {
				rpcError(err)
				break
			}
			cr := r.ContainerResponses[0]
			mounts := [][]interface{}{}
			for _, m := range cr.Mounts {
				mounts = append(mounts, []interface{}{m.ContainerPath, m.HostPath, m.ReadOnly})
			}
			devs := [][]interface{}{}
			for _, d := range cr.Devices {
				devs = append(devs, []interface{}{d.ContainerPath, d.HostPath, d.Permissions})
			}
			cdi := []string{}
			for _, d := range cr.CdiDevices {
				cdi = append(cdi, d.Name)
			}
			emit(map[string]interface{}{"event": "allocate", "response": map[string]interface{}{"envs": cr.Envs, "annotations": cr.Annotations, "mounts": mounts, "devices": devs, "cdi": cdi}})
		case "preferred":
			size, _ := strconv.Atoi(f[3])
			r, err := c.GetPreferredAllocation(ctx, &dp.PreferredAllocationRequest{ContainerRequests: []*dp.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: parseList(f[1]), MustIncludeDeviceIDs: parseList(f[2]), AllocationSize: int32(size)}}})
			if err != nil {
				rpcError(err)
				break
			}
			emit(map[string]interface{}{"event": "preferred", "ids": r.ContainerResponses[0].DeviceIDs})
		case "prestart":
			if _, err := c.PreStartContainer(ctx, &dp.PreStartContainerRequest{DevicesIds: parseList(f[1])}); err != nil {
				rpcError(err)
				break
			}
			emit(map[string]interface{}{"event": "prestart"})
		case "restart":
			s.Stop()
			deleteSockets(*dir)
			s = startKubelet(k)
			emit(map[string]interface{}{"event": "restarted"})
		}
		cancel()
	}
	s.Stop()
}

// --- podresources ---------------------------------------------------------------

type podResources struct {
	pr.UnimplementedPodResourcesListerServer
}

func topo(n int64) *pr.TopologyInfo { return &pr.TopologyInfo{Nodes: []*pr.NUMANode{{ID: n}}} }

func pod() *pr.PodResources {
	share := "share-1"
	return &pr.PodResources{Name: "interop-pod", Namespace: "default", Containers: []*pr.ContainerResources{{
		Name:    "main",
		Devices: []*pr.ContainerDevices{{ResourceName: "vendor.example/peer", DeviceIds: []string{"p-0", "p-1"}, Topology: topo(0)}},
		CpuIds:  []int64{1, 2},
		Memory:  []*pr.ContainerMemory{{MemoryType: "memory", Size: 1073741824, Topology: topo(0)}},
		DynamicResources: []*pr.DynamicResource{{ClaimName: "gpu-claim", ClaimNamespace: "default", ClaimResources: []*pr.ClaimResource{{
			CdiDevices: []*pr.CDIDevice{{Name: "vendor.example/peer=p-9"}}, DriverName: "drv", PoolName: "pool", DeviceName: "dev", ShareId: &share}}}},
	}}}
}

func (podResources) List(ctx context.Context, r *pr.ListPodResourcesRequest) (*pr.ListPodResourcesResponse, error) {
	emit(map[string]interface{}{"event": "call", "method": "List"})
	return &pr.ListPodResourcesResponse{PodResources: []*pr.PodResources{pod()}}, nil
}

func (podResources) GetAllocatableResources(ctx context.Context, r *pr.AllocatableResourcesRequest) (*pr.AllocatableResourcesResponse, error) {
	out := &pr.AllocatableResourcesResponse{CpuIds: []int64{0, 1, 2, 3},
		Memory: []*pr.ContainerMemory{{MemoryType: "memory", Size: 4294967296, Topology: topo(0)}}}
	for i := int64(0); i < 4; i++ {
		out.Devices = append(out.Devices, &pr.ContainerDevices{ResourceName: "vendor.example/peer", DeviceIds: []string{fmt.Sprintf("p-%d", i)}, Topology: topo(i / 2)})
	}
	return out, nil
}

func (podResources) Get(ctx context.Context, r *pr.GetPodResourcesRequest) (*pr.GetPodResourcesResponse, error) {
	p := pod()
	if r.PodName == p.Name && r.PodNamespace == p.Namespace {
		return &pr.GetPodResourcesResponse{PodResources: p}, nil
	}
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", r.PodName, r.PodNamespace)
}

func runPodResources(args []string) {
	fs := flag.NewFlagSet("podresources", flag.ExitOnError)
	socket := fs.String("socket", "", "")
	fs.Parse(args)
	lis, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	pr.RegisterPodResourcesListerServer(s, podResources{})
	go s.Serve(lis)
	emit(map[string]interface{}{"event": "ready"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
	}
	s.Stop()
}

// runPodResourcesClient is a monitoring agent: the bare socket path as the
// target, so grpc-go 1.33 sends it as :authority.
func runPodResourcesClient(args []string) {
	fs := flag.NewFlagSet("podresources-client", flag.ExitOnError)
	socket := fs.String("socket", "", "")
	fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, *socket, grpc.WithInsecure(), grpc.WithBlock(), grpc.WithContextDialer(unixDialer))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	c := pr.NewPodResourcesListerClient(conn)
	resp, err := c.List(ctx, &pr.ListPodResourcesRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "List:", err)
		os.Exit(1)
	}
	pods := []map[string]interface{}{}
	for _, p := range resp.PodResources {
		containers := []map[string]interface{}{}
		for _, ctr := range p.Containers {
			devs := []map[string]interface{}{}
			for _, d := range ctr.Devices {
				numa := []int64{}
				if d.Topology != nil {
					for _, n := range d.Topology.Nodes {
						numa = append(numa, n.ID)
					}
				}
				devs = append(devs, map[string]interface{}{"resource": d.ResourceName, "ids": d.DeviceIds, "numa": numa})
			}
			containers = append(containers, map[string]interface{}{"name": ctr.Name, "devices": devs})
		}
		pods = append(pods, map[string]interface{}{"name": p.Name, "namespace": p.Namespace, "containers": containers})
	}
	emit(map[string]interface{}{"event": "list", "pods": pods})
	alloc, err := c.GetAllocatableResources(ctx, &pr.AllocatableResourcesRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "GetAllocatableResources:", err)
		os.Exit(1)
	}
	ids := []string{}
	for _, d := range alloc.Devices {
		ids = append(ids, d.DeviceIds...)
	}
	sort.Strings(ids)
	emit(map[string]interface{}{"event": "allocatable", "ids": ids})
}

// --- bench --------------------------------------------------------------------

// runBench is a grpc-go load generator for Allocate, the counterpart of
// `dpctl bench allocate` (one connection, 1 device per call, the IDs taken
// from the first ListAndWatch snapshot). --authority localhost dials as the
// kubelet does; --authority path sends the socket path as :authority, as
// grpc-go 1.33 clients that dial a bare path do. Prints one JSON report.
func runBench(args []string) {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	socket := fs.String("socket", "", "")
	conc := fs.Int("concurrency", 1, "")
	dur := fs.Duration("duration", 0, "")
	reqs := fs.Int64("requests", 1000, "")
	auth := fs.String("authority", "localhost", "")
	fs.Parse(args)
	opts := []grpc.DialOption{grpc.WithInsecure(), grpc.WithBlock(), grpc.WithContextDialer(unixDialer)}
	if *auth != "path" {
		opts = append(opts, grpc.WithAuthority(*auth))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := grpc.DialContext(ctx, *socket, opts...)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	c := dp.NewDevicePluginClient(conn)
	lctx, lcancel := context.WithCancel(context.Background())
	stream, err := c.ListAndWatch(lctx, &dp.Empty{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ListAndWatch:", err)
		os.Exit(1)
	}
	first, err := stream.Recv()
	lcancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ListAndWatch:", err)
		os.Exit(1)
	}
	ids := []string{}
	for _, d := range first.Devices {
		if d.Health == "Healthy" {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) == 0 {
		fmt.Fprintln(os.Stderr, "the plugin has no healthy device")
		os.Exit(1)
	}
	var next, errs int64
	lats := make([][]time.Duration, *conc)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1) - 1
				if *dur > 0 {
					if time.Since(start) >= *dur {
						return
					}
				} else if i >= *reqs {
					return
				}
				req := &dp.AllocateRequest{ContainerRequests: []*dp.ContainerAllocateRequest{{DevicesIds: []string{ids[i%int64(len(ids))]}}}}
				t := time.Now()
				if _, err := c.Allocate(context.Background(), req); err != nil {
					atomic.AddInt64(&errs, 1)
					continue
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	all := []time.Duration{}
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		// As dpctl bench: the ceil(n*p)-th smallest sample.
		i := int(math.Ceil(p*float64(len(all)))) - 1
		if i < 0 {
			i = 0
		}
		return float64(all[i].Nanoseconds()) / 1e6
	}
	n := int64(len(all)) + errs
	emit(map[string]interface{}{"call": "Allocate", "concurrency": *conc, "requests": n, "errors": errs, "seconds": secs,
		"throughput": float64(n) / secs, "authority": *auth,
		"latencyMs": map[string]float64{"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1)}})
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peer plugin|kubelet|podresources ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "plugin":
		runPlugin(os.Args[2:])
	case "kubelet":
		runKubelet(os.Args[2:])
	case "podresources":
		runPodResources(os.Args[2:])
	case "podresources-client":
		runPodResourcesClient(os.Args[2:])
	case "bench":
		runBench(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Args[1])
		os.Exit(2)
	}
}

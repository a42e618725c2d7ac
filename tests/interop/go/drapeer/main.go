// A kubeletplugin-style DRA driver in Go (grpc-go), written from the
// documented behaviour of k8s.io/dynamic-resource-allocation/kubeletplugin:
// it reads a kubeconfig, GETs its Node, publishes its devices as a
// ResourceSlice (resource.k8s.io/v1, generateName), serves DRAPlugin v1 and
// registers through the plugin watcher; on NodePrepareResources it GETs each
// claim from the API server, requires a matching UID and status.allocation,
// answers the devices allocated to this driver with CDI IDs and writes a CDI
// spec; unprepare removes it. On SIGTERM it deletes its slice. JSON only
// (dpctl's local API server speaks JSON).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	dra "k8s.io/kubelet/pkg/apis/dra/v1"
	reg "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var (
	root       = flag.String("root", "/var/lib/kubelet", "kubelet root dir")
	driver     = flag.String("driver", "gpu.go.example.com", "driver name")
	kubeconfig = flag.String("kubeconfig", "", "kubeconfig (plain http)")
	node       = flag.String("node", "", "node name")
	cdiDir     = flag.String("cdi", "/var/run/cdi", "CDI spec dir")
	server     string
)

func api(method, path string, body interface{}) (int, map[string]interface{}, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, server+path, r)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]interface{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

type registration struct {
	reg.UnimplementedRegistrationServer
	endpoint string
}

func (r *registration) GetInfo(context.Context, *reg.InfoRequest) (*reg.PluginInfo, error) {
	return &reg.PluginInfo{Type: "DRAPlugin", Name: *driver, Endpoint: r.endpoint, SupportedVersions: []string{"v1.DRAPlugin"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *reg.RegistrationStatus) (*reg.RegistrationStatusResponse, error) {
	fmt.Printf("registered=%v error=%q\n", s.PluginRegistered, s.Error)
	return &reg.RegistrationStatusResponse{}, nil
}

type plugin struct {
	dra.UnimplementedDRAPluginServer
}

func specPath(uid string) string { return filepath.Join(*cdiDir, *driver+"-"+uid+".json") }

func prepareOne(c *dra.Claim) *dra.NodePrepareResourceResponse {
	code, obj, err := api("GET", fmt.Sprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", c.Namespace, c.Name), nil)
	if err != nil || code != 200 {
		return &dra.NodePrepareResourceResponse{Error: fmt.Sprintf("fetch ResourceClaim %s/%s: %d %v", c.Namespace, c.Name, code, err)}
	}
	meta, _ := obj["metadata"].(map[string]interface{})
	if meta["uid"] != c.Uid {
		return &dra.NodePrepareResourceResponse{Error: fmt.Sprintf("claim %s/%s: UID %v, not %s", c.Namespace, c.Name, meta["uid"], c.Uid)}
	}
	status, _ := obj["status"].(map[string]interface{})
	alloc, ok := status["allocation"].(map[string]interface{})
	if !ok {
		return &dra.NodePrepareResourceResponse{Error: "claim is not allocated"}
	}
	devs, _ := alloc["devices"].(map[string]interface{})
	results, _ := devs["results"].([]interface{})
	resp := &dra.NodePrepareResourceResponse{}
	var cdiDevs []map[string]interface{}
	for _, x := range results {
		res, _ := x.(map[string]interface{})
		if res["driver"] != *driver {
			continue
		}
		name := fmt.Sprintf("%s-%v", c.Uid, res["device"])
		resp.Devices = append(resp.Devices, &dra.Device{
			RequestNames: []string{fmt.Sprint(res["request"])},
			PoolName:     fmt.Sprint(res["pool"]),
			DeviceName:   fmt.Sprint(res["device"]),
			CdiDeviceIds: []string{"k8s." + *driver + "/claim=" + name},
		})
		cdiDevs = append(cdiDevs, map[string]interface{}{"name": name, "containerEdits": map[string]interface{}{"env": []string{"GO_PEER_DEVICE=" + fmt.Sprint(res["device"])}}})
	}
	spec, _ := json.Marshal(map[string]interface{}{"cdiVersion": "0.6.0", "kind": "k8s." + *driver + "/claim", "devices": cdiDevs})
	_ = os.MkdirAll(*cdiDir, 0o755)
	tmp := specPath(c.Uid) + ".tmp"
	if err := os.WriteFile(tmp, spec, 0o644); err != nil {
		return &dra.NodePrepareResourceResponse{Error: err.Error()}
	}
	if err := os.Rename(tmp, specPath(c.Uid)); err != nil {
		return &dra.NodePrepareResourceResponse{Error: err.Error()}
	}
	return resp
}

func (p *plugin) NodePrepareResources(_ context.Context, r *dra.NodePrepareResourcesRequest) (*dra.NodePrepareResourcesResponse, error) {
	out := &dra.NodePrepareResourcesResponse{Claims: map[string]*dra.NodePrepareResourceResponse{}}
	for _, c := range r.Claims {
		out.Claims[c.Uid] = prepareOne(c)
		fmt.Printf("prepare %s/%s error=%q\n", c.Namespace, c.Name, out.Claims[c.Uid].Error)
	}
	return out, nil
}

func (p *plugin) NodeUnprepareResources(_ context.Context, r *dra.NodeUnprepareResourcesRequest) (*dra.NodeUnprepareResourcesResponse, error) {
	out := &dra.NodeUnprepareResourcesResponse{Claims: map[string]*dra.NodeUnprepareResourceResponse{}}
	for _, c := range r.Claims {
		e := ""
		if err := os.Remove(specPath(c.Uid)); err != nil && !os.IsNotExist(err) {
			e = err.Error()
		}
		out.Claims[c.Uid] = &dra.NodeUnprepareResourceResponse{Error: e}
		fmt.Printf("unprepare %s/%s\n", c.Namespace, c.Name)
	}
	return out, nil
}

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	text, err := os.ReadFile(*kubeconfig)
	if err != nil {
		die("kubeconfig: %v", err)
	}
	for _, l := range strings.Split(string(text), "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "server:") {
			server = strings.TrimSpace(strings.TrimPrefix(t, "server:"))
		}
	}
	if !strings.HasPrefix(server, "http://") {
		die("kubeconfig: no plain-http server")
	}
	if code, _, err := api("GET", "/api/v1/nodes/"+*node, nil); err != nil || code != 200 {
		die("get node %s: %d %v", *node, code, err)
	}
	slice := map[string]interface{}{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
		"metadata": map[string]interface{}{"generateName": *node + "-" + *driver + "-"},
		"spec": map[string]interface{}{
			"driver": *driver, "nodeName": *node,
			"pool":    map[string]interface{}{"name": *node, "generation": 1, "resourceSliceCount": 1},
			"devices": []interface{}{map[string]interface{}{"name": "gpu-0"}, map[string]interface{}{"name": "gpu-1"}},
		},
	}
	code, created, err := api("POST", "/apis/resource.k8s.io/v1/resourceslices", slice)
	if err != nil || code != 201 {
		die("create ResourceSlice: %d %v %v", code, err, created)
	}
	sliceName := created["metadata"].(map[string]interface{})["name"].(string)
	fmt.Printf("published %s\n", sliceName)

	dir := filepath.Join(*root, "plugins", *driver)
	_ = os.MkdirAll(dir, 0o755)
	endpoint := filepath.Join(dir, "dra.sock")
	_ = os.Remove(endpoint)
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		die("listen: %v", err)
	}
	s := grpc.NewServer()
	dra.RegisterDRAPluginServer(s, &plugin{})
	go func() { _ = s.Serve(l) }()
	regPath := filepath.Join(*root, "plugins_registry", *driver+"-reg.sock")
	_ = os.Remove(regPath)
	rl, err := net.Listen("unix", regPath)
	if err != nil {
		die("listen: %v", err)
	}
	rs := grpc.NewServer()
	reg.RegisterRegistrationServer(rs, &registration{endpoint: endpoint})
	go func() { _ = rs.Serve(rl) }()
	fmt.Println("serving")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	rs.Stop()
	s.Stop()
	_, _, _ = api("DELETE", "/apis/resource.k8s.io/v1/resourceslices/"+sliceName, nil)
	_ = os.Remove(regPath)
	_ = os.Remove(endpoint)
	fmt.Println("stopped")
}

// A kubeletplugin-style DRA driver in Go (grpc-go), written from the
// documented behaviour of k8s.io/dynamic-resource-allocation/kubeletplugin:
// it reads a kubeconfig, GETs its Node, watch-lists its slices, publishes its devices as a
// ResourceSlice (resource.k8s.io/v1, generateName), serves DRAPlugin v1 and
// registers through the plugin watcher; on NodePrepareResources it GETs each
// claim from the API server, requires a matching UID and status.allocation,
// answers the devices allocated to this driver with CDI IDs and writes a CDI
// spec; unprepare removes it. On SIGTERM it deletes its slice. It talks to
// the API server as client-go does for built-in types: Accept
// "application/vnd.kubernetes.protobuf,application/json", protobuf request
// bodies (k8s\0 + runtime.Unknown), a protobuf watch-list of its slices
// (length-prefixed WatchEvents, ended by the initial-events-end bookmark)
// before it publishes, a PUT resync, and a new slice when its watch sees
// its slice deleted (a kubelet wipes its node's slices when it starts); the types are generated from
// dpctl's proto/k8s subset by tests/interop/setup.sh.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	dra "k8s.io/kubelet/pkg/apis/dra/v1"
	reg "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var (
	root       = flag.String("root", "/var/lib/kubelet", "kubelet root dir")
	driver     = flag.String("driver", "gpu.go.example.com", "driver name")
	kubeconfig = flag.String("kubeconfig", "", "kubeconfig (plain http, or https with certificate-authority-data)")
	node       = flag.String("node", "", "node name")
	cdiDir     = flag.String("cdi", "/var/run/cdi", "CDI spec dir")
	server     string
	token      string
)

const protoType = "application/vnd.kubernetes.protobuf"

// client-go's Accept for built-in types.
const accept = protoType + ",application/json"

var magic = []byte("k8s\x00")

// api makes one request as client-go does: protobuf preferred, protobuf body.
func api(method, path string, body []byte) (int, []byte, string, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, server+path, r)
	req.Header.Set("Accept", accept)
	authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", protoType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header.Get("Content-Type"), err
}

// authorize sends the kubeconfig user's bearer token, as client-go's bearer round tripper does.
func authorize(req *http.Request) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}

// envelope wraps a message as kube-apiserver's protobuf serializer does.
func envelope(apiVersion, kind string, m proto.Message) []byte {
	raw, err := proto.Marshal(m)
	if err != nil {
		die("marshal %s: %v", kind, err)
	}
	u := &kruntime.Unknown{
		TypeMeta:        &kruntime.TypeMeta{ApiVersion: proto.String(apiVersion), Kind: proto.String(kind)},
		Raw:             raw,
		ContentEncoding: proto.String(""),
		ContentType:     proto.String(""),
	}
	b, err := proto.Marshal(u)
	if err != nil {
		die("marshal envelope: %v", err)
	}
	return append(append([]byte{}, magic...), b...)
}

// unwrap reads an enveloped object of kind want into m; a Status becomes the error.
func unwrap(ctype string, body []byte, want string, m proto.Message) error {
	if ctype != protoType {
		return fmt.Errorf("Content-Type %q, not %q", ctype, protoType)
	}
	if !bytes.HasPrefix(body, magic) {
		return fmt.Errorf("no k8s magic in %q", body)
	}
	var u kruntime.Unknown
	if err := proto.Unmarshal(body[len(magic):], &u); err != nil {
		return err
	}
	kind := u.GetTypeMeta().GetKind()
	if kind == "Status" && want != "Status" {
		var st metav1.Status
		if err := proto.Unmarshal(u.Raw, &st); err != nil {
			return err
		}
		return fmt.Errorf("%s: %s (%d)", st.GetReason(), st.GetMessage(), st.GetCode())
	}
	if kind != want {
		return fmt.Errorf("kind %q (%s), not %q", kind, u.GetTypeMeta().GetApiVersion(), want)
	}
	return proto.Unmarshal(u.Raw, m)
}

// watchSlices runs the helper's watch-list of this driver's slices on this
// node over protobuf and reports what it sees; synced is closed at the
// bookmark that ends the initial events; deleted slices' names go to deleted.
func watchSlices(synced chan<- struct{}, deleted chan<- string) {
	q := "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=" +
		url.QueryEscape("spec.driver="+*driver+",spec.nodeName="+*node)
	req, _ := http.NewRequest("GET", server+"/apis/resource.k8s.io/v1/resourceslices?"+q, nil)
	req.Header.Set("Accept", accept)
	authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		die("watch: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != protoType+";stream=watch" {
		die("watch: %d %q", resp.StatusCode, ct)
	}
	for {
		var n [4]byte
		if _, err := io.ReadFull(resp.Body, n[:]); err != nil {
			fmt.Printf("watch ended: %v\n", err)
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(resp.Body, frame); err != nil {
			die("watch frame: %v", err)
		}
		var ev metav1.WatchEvent
		if err := proto.Unmarshal(frame, &ev); err != nil {
			die("watch event: %v", err)
		}
		var s resourcev1.ResourceSlice
		if err := unwrap(protoType, ev.GetObject().GetRaw(), "ResourceSlice", &s); err != nil {
			die("watch object: %v", err)
		}
		md := s.GetMetadata()
		if ev.GetType() == "BOOKMARK" && md.GetAnnotations()["k8s.io/initial-events-end"] == "true" {
			fmt.Printf("watch-list synced rv=%s\n", md.GetResourceVersion())
			close(synced)
			continue
		}
		fmt.Printf("watch %s %s rv=%s devices=%d\n", ev.GetType(), md.GetName(), md.GetResourceVersion(), len(s.GetSpec().GetDevices()))
		if ev.GetType() == "DELETED" {
			deleted <- md.GetName()
		}
	}
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
	code, body, ctype, err := api("GET", fmt.Sprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", c.Namespace, c.Name), nil)
	var claim resourcev1.ResourceClaim
	if err == nil {
		err = unwrap(ctype, body, "ResourceClaim", &claim)
	}
	if err != nil || code != 200 {
		return &dra.NodePrepareResourceResponse{Error: fmt.Sprintf("fetch ResourceClaim %s/%s: %d %v", c.Namespace, c.Name, code, err)}
	}
	if uid := claim.GetMetadata().GetUid(); uid != c.Uid {
		return &dra.NodePrepareResourceResponse{Error: fmt.Sprintf("claim %s/%s: UID %s, not %s", c.Namespace, c.Name, uid, c.Uid)}
	}
	alloc := claim.GetStatus().GetAllocation()
	if alloc == nil {
		return &dra.NodePrepareResourceResponse{Error: "claim is not allocated"}
	}
	resp := &dra.NodePrepareResourceResponse{}
	var cdiDevs []map[string]interface{}
	for _, res := range alloc.GetDevices().GetResults() {
		if res.GetDriver() != *driver {
			continue
		}
		name := fmt.Sprintf("%s-%s", c.Uid, res.GetDevice())
		resp.Devices = append(resp.Devices, &dra.Device{
			RequestNames: []string{res.GetRequest()},
			PoolName:     res.GetPool(),
			DeviceName:   res.GetDevice(),
			CdiDeviceIds: []string{"k8s." + *driver + "/claim=" + name},
		})
		cdiDevs = append(cdiDevs, map[string]interface{}{"name": name, "containerEdits": map[string]interface{}{"env": []string{"GO_PEER_DEVICE=" + res.GetDevice()}}})
	}
	updateStatus(c, &claim)
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

// updateStatus reports each device of this driver as Ready (KEP-4817 device
// status) as the DRA helper library's UpdateStatus does: PUT …/status with
// the claim read, in protobuf. Best effort: the answer is printed, prepare
// goes on either way.
func updateStatus(c *dra.Claim, claim *resourcev1.ResourceClaim) {
	for _, res := range claim.GetStatus().GetAllocation().GetDevices().GetResults() {
		if res.GetDriver() != *driver {
			continue
		}
		claim.Status.Devices = append(claim.Status.Devices, &resourcev1.AllocatedDeviceStatus{
			Driver: proto.String(res.GetDriver()),
			Pool:   proto.String(res.GetPool()),
			Device: proto.String(res.GetDevice()),
			Conditions: []*metav1.Condition{{
				Type:               proto.String("Ready"),
				Status:             proto.String("True"),
				Reason:             proto.String("Prepared"),
				Message:            proto.String(""),
				LastTransitionTime: &metav1.Time{Seconds: proto.Int64(1735689600)},
			}},
		})
	}
	path := fmt.Sprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s/status", c.Namespace, c.Name)
	code, body, ctype, err := api("PUT", path, envelope("resource.k8s.io/v1", "ResourceClaim", claim))
	var updated resourcev1.ResourceClaim
	if err == nil {
		err = unwrap(ctype, body, "ResourceClaim", &updated)
	}
	reason := ""
	if ds := updated.GetStatus().GetDevices(); len(ds) > 0 && len(ds[0].GetConditions()) > 0 {
		reason = ds[0].GetConditions()[0].GetReason()
	}
	fmt.Printf("status %s/%s code=%d devices=%d reason=%s err=%v\n", c.Namespace, c.Name, code, len(updated.GetStatus().GetDevices()), reason, err)
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

// publish creates this driver's ResourceSlice (generateName), in protobuf.
func publish() *resourcev1.ResourceSlice {
	slice := &resourcev1.ResourceSlice{
		Metadata: &metav1.ObjectMeta{GenerateName: proto.String(*node + "-" + *driver + "-")},
		Spec: &resourcev1.ResourceSliceSpec{
			Driver:   proto.String(*driver),
			NodeName: proto.String(*node),
			Pool:     &resourcev1.ResourcePool{Name: proto.String(*node), Generation: proto.Int64(1), ResourceSliceCount: proto.Int64(1)},
			Devices:  []*resourcev1.Device{{Name: proto.String("gpu-0")}, {Name: proto.String("gpu-1")}},
		},
	}
	code, body, ctype, err := api("POST", "/apis/resource.k8s.io/v1/resourceslices", envelope("resource.k8s.io/v1", "ResourceSlice", slice))
	var created resourcev1.ResourceSlice
	if err == nil {
		err = unwrap(ctype, body, "ResourceSlice", &created)
	}
	if err != nil || code != 201 {
		die("create ResourceSlice: %d %v", code, err)
	}
	return &created
}

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}

// loadKubeconfig reads the server and credentials from -kubeconfig.
func loadKubeconfig() {
	text, err := os.ReadFile(*kubeconfig)
	if err != nil {
		die("kubeconfig: %v", err)
	}
	// The subset of clientcmd this peer needs: the server, and the user's
	// token or tokenFile (the file wins, trimmed; relative to the kubeconfig).
	tokenFile, caData := "", ""
	for _, l := range strings.Split(string(text), "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "certificate-authority-data:"):
			caData = strings.TrimSpace(strings.TrimPrefix(t, "certificate-authority-data:"))
		case strings.HasPrefix(t, "server:"):
			server = strings.TrimSpace(strings.TrimPrefix(t, "server:"))
		case strings.HasPrefix(t, "token:"):
			token = strings.TrimSpace(strings.TrimPrefix(t, "token:"))
		case strings.HasPrefix(t, "tokenFile:"):
			tokenFile = strings.TrimSpace(strings.TrimPrefix(t, "tokenFile:"))
		}
	}
	if tokenFile != "" {
		if !filepath.IsAbs(tokenFile) {
			tokenFile = filepath.Join(filepath.Dir(*kubeconfig), tokenFile)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			die("kubeconfig: tokenFile: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	// https: the cluster's CA from certificate-authority-data, verified by Go's
	// crypto/tls as client-go's transport does (HTTP/1.1 or h2, as the server's ALPN says).
	if strings.HasPrefix(server, "https://") && caData != "" {
		pemBytes, err := base64.StdEncoding.DecodeString(caData)
		if err != nil {
			die("kubeconfig: certificate-authority-data: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			die("kubeconfig: certificate-authority-data holds no certificate")
		}
		http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	} else if !strings.HasPrefix(server, "http://") {
		die("kubeconfig: no plain-http server, nor https with certificate-authority-data")
	}
}

func main() {
	flag.Parse()
	loadKubeconfig()
	if *watchResource != "" {
		reflectResource(*watchResource, *watchNamespace)
		return
	}
	code, body, ctype, err := api("GET", "/api/v1/nodes/"+*node, nil)
	var n corev1.Node
	if err == nil {
		err = unwrap(ctype, body, "Node", &n)
	}
	if err != nil || code != 200 {
		die("get node %s: %d %v", *node, code, err)
	}
	fmt.Printf("node %s uid=%s\n", n.GetMetadata().GetName(), n.GetMetadata().GetUid())
	// Server version detection, as drivers do it (discovery's ServerVersion: GET /version, JSON).
	code, body, _, err = api("GET", "/version", nil)
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if err == nil {
		err = json.Unmarshal(body, &version)
	}
	fmt.Printf("version %s code=%d err=%v\n", version.GitVersion, code, err)
	synced := make(chan struct{})
	deleted := make(chan string, 16)
	go watchSlices(synced, deleted)
	<-synced

	created := publish()
	sliceName, sliceUID := created.GetMetadata().GetName(), created.GetMetadata().GetUid()
	fmt.Printf("published %s rv=%s\n", sliceName, created.GetMetadata().GetResourceVersion())
	// A resync as the helper's controller does it: PUT with the resource version read back.
	created.Spec.Devices = append(created.Spec.Devices, &resourcev1.Device{
		Name:       proto.String("gpu-2"),
		Attributes: map[string]*resourcev1.DeviceAttribute{"model": {String_: proto.String("go-peer")}},
	})
	code, body, ctype, err = api("PUT", "/apis/resource.k8s.io/v1/resourceslices/"+sliceName, envelope("resource.k8s.io/v1", "ResourceSlice", created))
	var updated resourcev1.ResourceSlice
	if err == nil {
		err = unwrap(ctype, body, "ResourceSlice", &updated)
	}
	if err != nil || code != 200 {
		die("update ResourceSlice: %d %v", code, err)
	}
	fmt.Printf("updated %s rv=%s devices=%d\n", sliceName, updated.GetMetadata().GetResourceVersion(), len(updated.GetSpec().GetDevices()))

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
	// As the helper's slice controller: a slice deleted under us (a kubelet
	// wipes its node's slices when it starts) is published again.
	for running := true; running; {
		select {
		case <-sig:
			running = false
		case name := <-deleted:
			if name == sliceName {
				created := publish()
				sliceName, sliceUID = created.GetMetadata().GetName(), created.GetMetadata().GetUid()
				fmt.Printf("republished %s rv=%s\n", sliceName, created.GetMetadata().GetResourceVersion())
			}
		}
	}
	rs.Stop()
	s.Stop()
	// As the slice controller deletes: DeleteOptions (protobuf) with a UID precondition.
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{Uid: proto.String(sliceUID)}}
	code, body, ctype, err = api("DELETE", "/apis/resource.k8s.io/v1/resourceslices/"+sliceName, envelope("resource.k8s.io/v1", "DeleteOptions", opts))
	var gone resourcev1.ResourceSlice
	if err == nil {
		err = unwrap(ctype, body, "ResourceSlice", &gone)
	}
	if err != nil || code != 200 {
		fmt.Printf("delete %s failed: %d %v\n", sliceName, code, err)
	} else {
		fmt.Printf("deleted %s\n", gone.GetMetadata().GetName())
	}
	_ = os.Remove(regPath)
	_ = os.Remove(endpoint)
	fmt.Println("stopped")
}

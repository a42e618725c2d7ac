// Command kubeletplugin is a DRA driver built on upstream's kubeletplugin
// helper (k8s.io/dynamic-resource-allocation/kubeletplugin, the version
// pinned in go.mod), the helper every real driver uses: it registers through
// the plugin watcher, serves DRAPlugin (v1 and v1beta1) and the health
// stream, publishes ResourceSlices with the helper's resourceslice controller
// through client-go, and fetches each claim from the API server before it
// calls PrepareResourceClaims. Only the driver's own part is written here:
// which devices it has, the CDI specs it writes for a prepared claim (one
// file per claim, named after the claim's UID, removed on unprepare), and
// the faults a test switches on by flag.
//
//	kubeletplugin -kubeconfig FILE -node NAME [-driver NAME] [-root DIR]
//	    [-registrar-dir DIR] [-plugin-dir DIR] [-cdi-dir DIR] [-devices N]
//	    [-json] [-rolling-update-uid UID] [-device-status]
//	    [-fail-prepare] [-fail-unprepare] [-dra-v1=false] [-dra-v1beta1=false]
//	    [-health=false] [-health-timeout 5s] [-device-prefix gpu-]
//	    [-device-metadata v1beta1[,v1alpha1]]
//
// -device-metadata turns on the helper's device metadata (KEP-5304,
// kubeletplugin.EnableDeviceMetadata with those versions, CDIDirectory the
// -cdi-dir): each prepared device carries the attributes the e2e test
// driver gives it (driverName, pool, device).
//
// Every event is one JSON line on stdout: {"event":"started",...},
// {"event":"prepare",...}, {"event":"unprepare",...}, {"event":"stopped"},
// and one line per request client-go sent ({"request":"POST /apis/...",
// "code":201,"contentType":...,"authorization":true}). Lines on stdin steer
// it while it runs: "publish N" publishes N devices; "health DEVICE STATUS"
// sends a health report (Healthy, Unhealthy, Unknown); "metadata NAMESPACE
// NAME UID REQUEST INTERFACE IP HARDWARE-ADDRESS" calls the helper's
// UpdateRequestMetadata for a prepared request with that network data. SIGTERM or SIGINT
// stops the helper and exits 0.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

var out sync.Mutex

func emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"event":"unprintable","error":%q}`, err.Error()))
	}
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(b))
}

// sniff reports each request client-go sends: method, path, query, body
// type, whether it carries credentials (never the header itself), status.
type sniff struct{ next http.RoundTripper }

func (s sniff) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	line := map[string]any{"request": r.Method + " " + r.URL.Path, "query": r.URL.RawQuery, "scheme": r.URL.Scheme,
		"contentType": r.Header.Get("Content-Type"), "accept": r.Header.Get("Accept"),
		"authorization": r.Header.Get("Authorization") != "", "code": code}
	if err != nil {
		line["error"] = err.Error()
	}
	emit(line)
	return resp, err
}

type driver struct {
	name, node, cdiDir string
	devicePrefix       string
	failPrepare        bool
	failUnprepare      bool
	deviceStatus       bool
	health             chan struct{}
	healthTimeout      time.Duration
	client             kubernetes.Interface

	mu       sync.Mutex
	devices  []string
	prepared map[types.UID][]kubeletplugin.Device
	status   map[string]kubeletplugin.HealthStatus
}

func (d *driver) cdiKind() string { return "k8s." + d.name + "/claim" }

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cdiDir, "k8s."+d.name+"-claim_"+string(uid)+".json")
}

// writeSpec writes the claim's CDI spec (one device per allocated device,
// named <claim UID>-<device>) atomically: aside, then renamed.
// configEnv is the env the claim's opaque configs for this driver give a
// result, in the e2e test driver's convention (admin_KEY from the class,
// user_KEY from the claim; resourceclaim.ConfigForResult picks them).
func (d *driver) configEnv(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) ([]string, error) {
	env := map[string]string{}
	for i, c := range resourceclaim.ConfigForResult(claim.Status.Allocation.Devices.Config, r) {
		if c.Opaque.Driver != d.name || len(c.Opaque.Parameters.Raw) == 0 {
			continue
		}
		kind := "user"
		if c.Source == resourceapi.AllocationConfigSourceClass {
			kind = "admin"
		}
		var params map[string]string
		if err := json.Unmarshal(c.Opaque.Parameters.Raw, &params); err != nil {
			return nil, fmt.Errorf("parameters in config #%d: decoding %s parameters: %w", i, kind, err)
		}
		for k, v := range params {
			env[kind+"_"+k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

func (d *driver) writeSpec(uid types.UID, devices []string, config map[string][]string) error {
	type edits struct {
		Env []string `json:"env"`
	}
	type dev struct {
		Name           string `json:"name"`
		ContainerEdits edits  `json:"containerEdits"`
	}
	spec := struct {
		CDIVersion string `json:"cdiVersion"`
		Kind       string `json:"kind"`
		Devices    []dev  `json:"devices"`
	}{CDIVersion: "0.6.0", Kind: d.cdiKind()}
	for _, name := range devices {
		env := []string{"DRA_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "=" + string(uid)}
		env = append(env, config[name]...)
		spec.Devices = append(spec.Devices, dev{Name: string(uid) + "-" + name, ContainerEdits: edits{Env: env}})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	path := d.specPath(uid)
	tmp := filepath.Join(d.cdiDir, ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		ev := map[string]any{"event": "prepare", "claim": claim.Namespace + "/" + claim.Name, "uid": string(claim.UID)}
		if d.failPrepare {
			err := errors.New("injected prepare failure (-fail-prepare)")
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			ev["error"] = err.Error()
			emit(ev)
			continue
		}
		var devices []kubeletplugin.Device
		var names []string
		var statuses []resourceapi.AllocatedDeviceStatus
		config := map[string][]string{}
		var configErr error
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != d.name {
				continue
			}
			env, err := d.configEnv(claim, r)
			if err != nil {
				configErr = err
				break
			}
			config[r.Device] = env
			names = append(names, r.Device)
			pool, device := r.Pool, r.Device
			devices = append(devices, kubeletplugin.Device{
				Requests:     []string{r.Request},
				PoolName:     r.Pool,
				DeviceName:   r.Device,
				CDIDeviceIDs: []string{d.cdiKind() + "=" + string(claim.UID) + "-" + r.Device},
				ShareID:      r.ShareID,
				// Ignored unless -device-metadata: as the e2e test driver's kubeletplugin.go.
				Metadata: &kubeletplugin.DeviceMetadata{Attributes: map[string]resourceapi.DeviceAttribute{
					"driverName": {StringValue: &d.name}, "pool": {StringValue: &pool}, "device": {StringValue: &device}}},
			})
			statuses = append(statuses, resourceapi.AllocatedDeviceStatus{Driver: d.name, Pool: r.Pool, Device: r.Device, ShareID: (*string)(r.ShareID),
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared",
					LastTransitionTime: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))}}})
		}
		if configErr != nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: configErr}
			ev["error"] = configErr.Error()
			emit(ev)
			continue
		}
		if err := d.writeSpec(claim.UID, names, config); err != nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("write CDI spec: %w", err)}
			ev["error"] = err.Error()
			emit(ev)
			continue
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
		d.mu.Lock()
		d.prepared[claim.UID] = devices
		d.mu.Unlock()
		ev["devices"] = names
		if d.deviceStatus && len(statuses) > 0 {
			c := claim.DeepCopy()
			c.Status.Devices = statuses
			updated, err := d.client.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			if err != nil {
				ev["statusError"] = err.Error()
			} else {
				ev["statusDevices"] = len(updated.Status.Devices)
			}
		}
		emit(ev)
	}
	return result, nil
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := map[types.UID]error{}
	for _, claim := range claims {
		ev := map[string]any{"event": "unprepare", "claim": claim.Namespace + "/" + claim.Name, "uid": string(claim.UID)}
		var err error
		if d.failUnprepare {
			err = errors.New("injected unprepare failure (-fail-unprepare)")
		} else if e := os.Remove(d.specPath(claim.UID)); e != nil && !os.IsNotExist(e) {
			err = fmt.Errorf("remove CDI spec: %w", e)
		}
		result[claim.UID] = err
		if err != nil {
			ev["error"] = err.Error()
		}
		emit(ev)
	}
	return result, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	emit(map[string]any{"event": "error", "message": msg, "error": err.Error(), "recoverable": errors.Is(err, kubeletplugin.ErrRecoverable)})
}

// report is a snapshot of every device's health.
func (d *driver) report() kubeletplugin.DeviceHealthReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r kubeletplugin.DeviceHealthReport
	for _, name := range d.devices {
		st, ok := d.status[name]
		if !ok {
			st = kubeletplugin.HealthStatusHealthy
		}
		r.Devices = append(r.Devices, kubeletplugin.DeviceHealth{PoolName: d.node, DeviceName: name, Health: st,
			LastUpdated: time.Now(), HealthCheckTimeout: d.healthTimeout})
	}
	return r
}

// WatchHealthStatus sends a snapshot at once, whenever a device's health
// changes (stdin), and again within the health check timeout (the kubelet
// reports a device Unknown when its health was not refreshed in time).
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	emit(map[string]any{"event": "health-watch"})
	refresh := time.NewTicker(d.healthTimeout / 2)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case reports <- d.report():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
		case <-d.health:
		}
	}
}

func (d *driver) resources(n int) resourceslice.DriverResources {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.devices = nil
	var devs []resourceapi.Device
	for i := 0; i < n; i++ {
		name := d.devicePrefix + strconv.Itoa(i)
		d.devices = append(d.devices, name)
		model := "kubeletplugin"
		idx := int64(i)
		devs = append(devs, resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model": {StringValue: &model}, "index": {IntValue: &idx}}})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{d.node: {Slices: []resourceslice.Slice{{Devices: devs}}}}}
}

func main() {
	fs := flag.NewFlagSet("kubeletplugin", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (loaded with clientcmd, as every driver does)")
	name := fs.String("driver", "gpu.kubeletplugin.example.com", "the driver's name")
	node := fs.String("node", "", "the node's name (and the pool's)")
	root := fs.String("root", "/var/lib/kubelet", "the kubelet root: registrar and plugin directories below it unless given")
	registrar := fs.String("registrar-dir", "", "where the registration socket goes (default ROOT/plugins_registry)")
	pluginDir := fs.String("plugin-dir", "", "where the DRA socket goes (default ROOT/plugins/DRIVER)")
	cdiDir := fs.String("cdi-dir", "/var/run/cdi", "where CDI specs are written")
	devices := fs.Int("devices", 2, "how many devices to publish at start (0: publish nothing)")
	jsonOnly := fs.Bool("json", false, "talk JSON to the API server (client-go's generated clients default to protobuf)")
	rolling := fs.String("rolling-update-uid", "", "kubeletplugin.RollingUpdate with this UID (sockets named after it)")
	deviceStatus := fs.Bool("device-status", false, "write each prepared device's status into the claim (UpdateStatus)")
	failPrepare := fs.Bool("fail-prepare", false, "fail every claim's prepare")
	failUnprepare := fs.Bool("fail-unprepare", false, "fail every claim's unprepare")
	draV1 := fs.Bool("dra-v1", true, "serve DRAPlugin v1")
	draV1beta1 := fs.Bool("dra-v1beta1", true, "serve DRAPlugin v1beta1")
	health := fs.Bool("health", true, "serve the health stream")
	healthTimeout := fs.Duration("health-timeout", 5*time.Second, "each device's health check timeout")
	devicePrefix := fs.String("device-prefix", "gpu-", "device names are this and 0, 1, …")
	deviceMetadata := fs.String("device-metadata", "", "device metadata in these metadata.resource.k8s.io versions, in order (v1beta1,v1alpha1); empty: off")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	verbosity := fs.String("v", "0", "klog verbosity of the helper's log (stderr)")
	_ = fs.Parse(os.Args[1:])
	_ = klogFlags.Set("v", *verbosity)

	die := func(what string, err error) {
		emit(map[string]any{"event": "failed", "step": what, "error": err.Error()})
		os.Exit(1)
	}
	if *node == "" {
		die("flags", errors.New("-node is required"))
	}
	if *registrar == "" {
		*registrar = filepath.Join(*root, "plugins_registry")
	}
	if *pluginDir == "" {
		*pluginDir = filepath.Join(*root, "plugins", *name)
	}
	for _, dir := range []string{*registrar, *pluginDir, *cdiDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			die("mkdir", err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		die("kubeconfig", err)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return sniff{rt} })
	if *jsonOnly {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("clientset", err)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	d := &driver{name: *name, node: *node, cdiDir: *cdiDir, devicePrefix: *devicePrefix, failPrepare: *failPrepare, failUnprepare: *failUnprepare,
		deviceStatus: *deviceStatus, health: make(chan struct{}, 1), healthTimeout: *healthTimeout,
		client: client, status: map[string]kubeletplugin.HealthStatus{}, prepared: map[types.UID][]kubeletplugin.Device{}}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(*name),
		kubeletplugin.NodeName(*node),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(*registrar),
		kubeletplugin.PluginDataDirectoryPath(*pluginDir),
		kubeletplugin.NodeV1(*draV1),
		kubeletplugin.NodeV1beta1(*draV1beta1),
		kubeletplugin.HealthService(*health),
	}
	if *rolling != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(*rolling)))
	}
	if *deviceMetadata != "" {
		var versions []schema.GroupVersion
		for _, v := range strings.Split(*deviceMetadata, ",") {
			versions = append(versions, schema.GroupVersion{Group: "metadata.resource.k8s.io", Version: v})
		}
		opts = append(opts, kubeletplugin.EnableDeviceMetadata(true, versions), kubeletplugin.CDIDirectory(*cdiDir))
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		die("start", err)
	}
	if *devices > 0 {
		// PublishResources waits for the helper's slice informer to sync: a
		// SIGTERM meanwhile is a normal stop (the helper removes its sockets),
		// and any other failure stops the helper before exiting too.
		if err := helper.PublishResources(ctx, d.resources(*devices)); err != nil && ctx.Err() == nil {
			helper.Stop()
			die("publish", err)
		}
	}
	emit(map[string]any{"event": "started", "driver": *name, "node": *node, "devices": *devices})

	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			w := strings.Fields(in.Text())
			switch {
			case len(w) == 2 && w[0] == "publish":
				n, err := strconv.Atoi(w[1])
				if err != nil {
					emit(map[string]any{"event": "bad-command", "line": in.Text()})
					continue
				}
				if err := helper.PublishResources(ctx, d.resources(n)); err != nil {
					emit(map[string]any{"event": "error", "message": "publish", "error": err.Error()})
					continue
				}
				emit(map[string]any{"event": "published", "devices": n})
			case len(w) == 3 && w[0] == "health":
				d.mu.Lock()
				d.status[w[1]] = kubeletplugin.HealthStatus(w[2])
				d.mu.Unlock()
				select {
				case d.health <- struct{}{}:
				default:
				}
				emit(map[string]any{"event": "health", "device": w[1], "health": w[2]})
			case len(w) == 8 && w[0] == "metadata":
				// metadata NAMESPACE NAME UID REQUEST INTERFACE IP HARDWARE-ADDRESS:
				// the request's prepared devices, now with network data (an NRI hook's call).
				ns, claimName, uid, request := w[1], w[2], types.UID(w[3]), w[4]
				network := &resourceapi.NetworkDeviceData{InterfaceName: w[5], IPs: []string{w[6]}, HardwareAddress: w[7]}
				d.mu.Lock()
				var devs []kubeletplugin.Device
				for _, dev := range d.prepared[uid] {
					for _, r := range dev.Requests {
						if resourceclaim.BaseRequestRef(r) == resourceclaim.BaseRequestRef(request) {
							dev.Metadata = &kubeletplugin.DeviceMetadata{Attributes: dev.Metadata.Attributes, NetworkData: network}
							devs = append(devs, dev)
						}
					}
				}
				d.mu.Unlock()
				if err := helper.UpdateRequestMetadata(ctx, ns, claimName, uid, request, devs); err != nil {
					emit(map[string]any{"event": "error", "message": "metadata", "error": err.Error()})
					continue
				}
				emit(map[string]any{"event": "metadata-updated", "claim": ns + "/" + claimName, "request": request})
			default:
				emit(map[string]any{"event": "bad-command", "line": in.Text()})
			}
		}
	}()

	<-ctx.Done()
	helper.Stop()
	emit(map[string]any{"event": "stopped"})
}

// Command dramanager is the DRA-manager oracle of dpctl's differential test
// (tests/e2e/dramanager_diff.rs): upstream's own kubelet DRA manager
// (k8s.io/kubernetes/pkg/kubelet/cm/dra) run in process against a real DRA
// driver on a socket, as its manager_test.go drives it.
//
//	dramanager -scenario FILE -dir DIR
//
// The scenario (JSON) gives ResourceClaims (already allocated: status.allocation
// and reservedFor), Pods, steps (prepare POD, unprepare POD, restart) and
// the feature gates to set (as the kubelet's --feature-gates). The
// manager's clientset is client-go's fake holding the claims; the same claims
// are served read-only over plain HTTP at an address written to DIR/kubeconfig,
// so the driver (started by the test with DIR as its kubelet root) fetches the
// claims it prepares as a real driver does. The kubelet's own plugin manager
// (k8s.io/kubernetes/pkg/kubelet/pluginmanager: the plugin watcher on
// DIR/plugins_registry and its reconciler, retrying as the kubelet does) hands
// the driver to the DRA manager's plugin handler; the oracle waits until the
// handler has registered it, runs the steps, and prints one JSON line: per step the error, the checkpoint file
// DIR/dra_manager_state, and for every pod prepared and not unprepared, per
// container: GetResources' CDI devices, the PodResources view (as
// container_manager_linux.go GetDynamicResources builds it from
// GetContainerClaimInfos) and UpdateAllocatedResourcesStatus' names and
// resource IDs.
//
//	dramanager -read FILE
//
// reads FILE as a DRA checkpoint with upstream's checkpointer and prints the
// ClaimInfoStateList it holds (JSON), or {"error": …}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

type step struct {
	Op  string `json:"op"` // prepare, unprepare, restart, register, health, wait
	Pod string `json:"pod,omitempty"`
	// Millis: how long a wait step lets time pass (a health stream's retries).
	Millis int `json:"millis,omitempty"`
}

type scenario struct {
	// LateDriver: the driver is registered by a "register" step (the
	// oracle prints {"waiting":"driver"} for the test to start it), not
	// before the first step.
	LateDriver bool                         `json:"lateDriver,omitempty"`
	Claims     []*resourceapi.ResourceClaim `json:"claims"`
	Pods       []*v1.Pod                    `json:"pods"`
	Steps      []step                       `json:"steps"`
	// FeatureGates set before the manager starts, as --feature-gates
	// (e.g. DRAWorkloadResourceClaims: claims reserved for a PodGroup).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

type claimResource struct {
	Driver     string   `json:"driver"`
	Pool       string   `json:"pool"`
	Device     string   `json:"device"`
	ShareID    string   `json:"shareID,omitempty"`
	CDIDevices []string `json:"cdiDevices"`
}

type dynamicResource struct {
	ClaimName      string          `json:"claimName"`
	ClaimNamespace string          `json:"claimNamespace"`
	ClaimResources []claimResource `json:"claimResources"`
}

type resourceStatus struct {
	Name        string   `json:"name"`
	ResourceIDs []string `json:"resourceIDs"`
	// Health: per resource ID its health and message, at a health step only
	// (elsewhere when a stream's first snapshot arrives is a race).
	Health []resourceHealth `json:"health,omitempty"`
}

type resourceHealth struct {
	ResourceID string  `json:"resourceID"`
	Health     string  `json:"health"`
	Message    *string `json:"message,omitempty"`
}

type containerView struct {
	CDI          []string          `json:"cdi"`
	CDIError     string            `json:"cdiError,omitempty"`
	PodResources []dynamicResource `json:"podResources"`
	PRError      string            `json:"podResourcesError,omitempty"`
	Status       []resourceStatus  `json:"status"`
}

type stepResult struct {
	Op         string                              `json:"op"`
	Pod        string                              `json:"pod,omitempty"`
	Error      string                              `json:"error,omitempty"`
	Checkpoint string                              `json:"checkpoint"`
	Pods       map[string]map[string]containerView `json:"pods"`
}

type output struct {
	Steps []stepResult `json:"steps"`
	Error string       `json:"error,omitempty"`
}

func main() {
	scenarioFile := flag.String("scenario", "", "the scenario (JSON)")
	dir := flag.String("dir", "", "the kubelet root: the checkpoint, the driver's plugins_registry, the kubeconfig")
	read := flag.String("read", "", "read this file as a DRA checkpoint and print its claims")
	flag.Parse()
	klog.SetOutput(os.Stderr)
	if *read != "" {
		readCheckpoint(*read)
		return
	}
	if *scenarioFile == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: dramanager -scenario FILE -dir DIR | dramanager -read FILE")
		os.Exit(2)
	}
	out, err := run(*scenarioFile, *dir)
	if err != nil {
		out.Error = err.Error()
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func readCheckpoint(path string) {
	emit := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	cp, err := state.NewCheckpointer(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		emit(map[string]string{"error": err.Error()})
		return
	}
	c, err := cp.GetOrCreate()
	if err != nil {
		emit(map[string]string{"error": err.Error()})
		return
	}
	list, err := c.GetClaimInfoStateList()
	if err != nil {
		emit(map[string]string{"error": err.Error()})
		return
	}
	if list == nil {
		list = state.ClaimInfoStateList{}
	}
	emit(map[string]any{"claims": list})
}

// serveClaims answers GET of a ResourceClaim from the fake clientset (JSON),
// and accepts what a driver publishes (ResourceSlices) without keeping it.
func serveClaims(client *fake.Clientset) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	status := func(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
		})
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		// apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME
		if r.Method == http.MethodGet && len(parts) == 7 && parts[0] == "apis" && parts[1] == "resource.k8s.io" && parts[3] == "namespaces" && parts[5] == "resourceclaims" {
			if parts[2] != "v1" {
				status(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
				return
			}
			c, err := client.ResourceV1().ResourceClaims(parts[4]).Get(r.Context(), parts[6], metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				status(w, http.StatusNotFound, metav1.StatusReasonNotFound, err.Error())
				return
			} else if err != nil {
				status(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
				return
			}
			c = c.DeepCopy()
			c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaim"
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(c)
			return
		}
		if strings.Contains(r.URL.Path, "/resourceslices") {
			switch r.Method {
			case http.MethodPost:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				var body map[string]any
				_ = json.NewDecoder(r.Body).Decode(&body)
				_ = json.NewEncoder(w).Encode(body)
				return
			case http.MethodDelete, http.MethodPut:
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{}`))
				return
			}
		}
		status(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not served by the oracle: "+r.Method+" "+r.URL.Path)
	})
	go func() { _ = http.Serve(l, h) }()
	return "http://" + l.Addr().String(), nil
}

const kubeconfigText = `apiVersion: v1
kind: Config
clusters:
- name: oracle
  cluster:
    server: %s
contexts:
- name: oracle
  context:
    cluster: oracle
    user: oracle
current-context: oracle
users:
- name: oracle
  user: {}
`

// announcing is the DRA manager's plugin handler as the kubelet adds it to
// its plugin manager, telling the oracle each time it has registered a plugin.
type announcing struct {
	cache.PluginHandler
	registered chan struct{}
}

// announce tells the oracle a plugin registered (RegisterPlugin, whose
// signature is the release's, is in compat.go).
func (a announcing) announce(err error) error {
	if err == nil {
		select {
		case a.registered <- struct{}{}:
		default:
		}
	}
	return err
}

// awaitDriver waits (at most 60 s) for the plugin manager to register a driver.
func (k *kubelet) awaitDriver() error {
	select {
	case <-k.registered:
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("the kubelet's plugin manager registered no driver within 60s")
	}
}

type notReady struct{}

// allReady: the plugin manager's sources are ready (it does not ask).
type allReady struct{}

func (allReady) AllReady() bool { return true }

func (allReady) AddSource(string) {}

// AllReady is false: the manager's reconcile loop (which unprepares claims of
// pods it is not told about) stays idle; the steps say what happens.
func (notReady) AllReady() bool { return false }

func (notReady) AddSource(string) {}

func node(context.Context) (*v1.Node, error) {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dpctl-node", UID: "node-uid"}}, nil
}

type kubelet struct {
	m      *dra.Manager
	cancel context.CancelFunc
	ctx    context.Context
	// registered has a value each time the plugin manager registered a driver.
	registered chan struct{}
	// stopPlugins stops the plugin manager.
	stopPlugins chan struct{}
}

// start is the kubelet starting: its DRA manager, then its plugin manager
// with the DRA handler, which registers whatever driver sockets
// DIR/plugins_registry holds (after a restart: the driver already running).
func start(dir string, pods map[string]*v1.Pod, client *fake.Clientset) (*kubelet, error) {
	logger := klog.Background()
	m, err := dra.NewManager(logger, client, dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	active := func() []*v1.Pod {
		var out []*v1.Pod
		for _, p := range pods {
			out = append(out, p)
		}
		return out
	}
	if err := m.Start(ctx, active, node, notReady{}); err != nil {
		cancel()
		return nil, err
	}
	k := &kubelet{m: m, cancel: cancel, ctx: ctx, registered: make(chan struct{}, 1), stopPlugins: make(chan struct{})}
	pm := pluginmanager.NewPluginManager(filepath.Join(dir, "plugins_registry"), &record.FakeRecorder{})
	pm.AddHandler(registerapi.DRAPlugin, announcing{PluginHandler: m.GetWatcherHandler(), registered: k.registered})
	go pm.Run(ctx, allReady{}, k.stopPlugins)
	return k, nil
}

func (k *kubelet) stop() {
	close(k.stopPlugins)
	k.cancel()
	stopManager(k.m)
}

// podResources is container_manager_linux.go GetDynamicResources over
// GetContainerClaimInfos (cdiDevices accumulates over a driver's devices,
// as there).
func podResources(infos []*dra.ClaimInfo) []dynamicResource {
	out := []dynamicResource{}
	for _, info := range infos {
		d := dynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace, ClaimResources: []claimResource{}}
		drivers := make([]string, 0, len(info.DriverState))
		for name := range info.DriverState {
			drivers = append(drivers, name)
		}
		sort.Strings(drivers)
		for _, driver := range drivers {
			var cdi []string
			for _, dev := range info.DriverState[driver].Devices {
				cdi = append(cdi, dev.CDIDeviceIDs...)
				r := claimResource{Driver: driver, Pool: dev.PoolName, Device: dev.DeviceName, CDIDevices: append([]string{}, cdi...)}
				if dev.ShareID != nil {
					r.ShareID = string(*dev.ShareID)
				}
				d.ClaimResources = append(d.ClaimResources, r)
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClaimName < out[j].ClaimName })
	return out
}

// allocatedStatus is the pod's containers' allocatedResourcesStatus as
// UpdateAllocatedResourcesStatus fills it.
func allocatedStatus(m *dra.Manager, pod *v1.Pod) *v1.PodStatus {
	status := &v1.PodStatus{}
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, v1.ContainerStatus{Name: c.Name})
	}
	updateStatus(m, pod, status)
	return status
}

// healthKnown: every resource of every container has a health other than Unknown.
func healthKnown(m *dra.Manager, pods map[string]*v1.Pod) bool {
	for _, p := range pods {
		for _, cs := range allocatedStatus(m, p).ContainerStatuses {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					if r.Health == v1.ResourceHealthStatusUnknown || r.Health == "" {
						return false
					}
				}
			}
		}
	}
	return true
}

func view(m *dra.Manager, pod *v1.Pod, withHealth bool) map[string]containerView {
	out := map[string]containerView{}
	status := allocatedStatus(m, pod)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		var cv containerView
		cv.CDI = []string{}
		if info, err := m.GetResources(pod, c); err != nil {
			cv.CDIError = err.Error()
		} else {
			for _, d := range info.CDIDevices {
				cv.CDI = append(cv.CDI, d.Name)
			}
			sort.Strings(cv.CDI)
		}
		if infos, err := m.GetContainerClaimInfos(pod, c); err != nil {
			cv.PRError = err.Error()
			cv.PodResources = []dynamicResource{}
		} else {
			cv.PodResources = podResources(infos)
		}
		cv.Status = []resourceStatus{}
		for _, cs := range status.ContainerStatuses {
			if cs.Name != c.Name {
				continue
			}
			for _, rs := range cs.AllocatedResourcesStatus {
				ids := []string{}
				health := []resourceHealth{}
				for _, r := range rs.Resources {
					ids = append(ids, string(r.ResourceID))
					health = append(health, resourceHealth{ResourceID: string(r.ResourceID), Health: string(r.Health), Message: r.Message})
				}
				sort.Strings(ids)
				sort.Slice(health, func(i, j int) bool { return health[i].ResourceID < health[j].ResourceID })
				st := resourceStatus{Name: string(rs.Name), ResourceIDs: ids}
				if withHealth {
					st.Health = health
				}
				cv.Status = append(cv.Status, st)
			}
		}
		sort.Slice(cv.Status, func(i, j int) bool { return cv.Status[i].Name < cv.Status[j].Name })
		out[c.Name] = cv
	}
	return out
}

func run(scenarioFile, dir string) (output, error) {
	out := output{Steps: []stepResult{}}
	b, err := os.ReadFile(scenarioFile)
	if err != nil {
		return out, err
	}
	var sc scenario
	if err := json.Unmarshal(b, &sc); err != nil {
		return out, fmt.Errorf("scenario: %w", err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(sc.FeatureGates); err != nil {
		return out, fmt.Errorf("feature gates: %w", err)
	}
	objs := []runtime.Object{}
	for _, c := range sc.Claims {
		objs = append(objs, c)
	}
	client := fake.NewClientset(objs...)
	server, err := serveClaims(client)
	if err != nil {
		return out, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), fmt.Appendf(nil, kubeconfigText, server), 0o600); err != nil {
		return out, err
	}
	// The test starts the driver once this line is out (or the one of a register step).
	fmt.Println(`{"ready":true}`)
	pods := map[string]*v1.Pod{}
	for _, p := range sc.Pods {
		pods[p.Name] = p
	}
	active := map[string]*v1.Pod{}
	k, err := start(dir, active, client)
	if err != nil {
		return out, err
	}
	defer func() { k.stop() }()
	// driver: a driver is running (registered before the first step, or by a register step).
	driver := !sc.LateDriver
	if driver {
		if err := k.awaitDriver(); err != nil {
			return out, err
		}
	}
	ctx := context.Background()
	for _, s := range sc.Steps {
		r := stepResult{Op: s.Op, Pod: s.Pod}
		var err error
		switch s.Op {
		case "prepare", "unprepare":
			p, ok := pods[s.Pod]
			if !ok {
				return out, fmt.Errorf("step %s: no pod %q", s.Op, s.Pod)
			}
			if s.Op == "prepare" {
				if err = k.m.PrepareResources(ctx, p); err == nil {
					active[p.Name] = p
				}
			} else {
				if err = k.m.UnprepareResources(ctx, p); err == nil {
					delete(active, p.Name)
				}
			}
		case "health":
			// Until every resource's health is known (the driver's first
			// snapshot arrived), at most 20 s; then the view shows it.
			for deadline := time.Now().Add(20 * time.Second); !healthKnown(k.m, active) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
		case "wait":
			time.Sleep(time.Duration(s.Millis) * time.Millisecond)
		case "register":
			fmt.Println(`{"waiting":"driver"}`)
			if err = k.awaitDriver(); err != nil {
				return out, err
			}
			driver = true
		case "restart":
			k.stop()
			k, err = start(dir, active, client)
			if err != nil {
				return out, fmt.Errorf("restart: %w", err)
			}
			if driver {
				if err = k.awaitDriver(); err != nil {
					return out, fmt.Errorf("restart: %w", err)
				}
			}
		default:
			return out, fmt.Errorf("unknown step %q", s.Op)
		}
		if err != nil {
			r.Error = err.Error()
		}
		cp, rerr := os.ReadFile(filepath.Join(dir, "dra_manager_state"))
		if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return out, rerr
		}
		r.Checkpoint = string(cp)
		r.Pods = map[string]map[string]containerView{}
		for name, p := range active {
			r.Pods[name] = view(k.m, p, s.Op == "health")
		}
		out.Steps = append(out.Steps, r)
	}
	return out, nil
}

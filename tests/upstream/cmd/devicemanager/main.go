// Command devicemanager is the device-manager oracle of dpctl's differential
// test (tests/e2e/devicemanager_diff.rs): upstream's kubelet device manager,
// k8s.io/kubernetes/pkg/kubelet/cm/devicemanager, driven in process as its
// own manager_test.go drives it, against a real device plugin process.
//
// Stdin: one scenario (JSON): the plugins (argv of a plugin program; the
// test gives dpctl serve) and steps: start or stop a plugin, admit a pod
// (v1.Pod JSON: Allocate for each init then app container, as the topology
// manager's admit handler calls it, then GetDeviceRunContainerOptions for
// each container), remove a pod, restart the kubelet (Stop, then a new
// manager on the same directory, which reads the checkpoint). Stdout: one
// JSON line per step: the admission result, each container's devices and
// run options, capacity and allocatable per resource, and the checkpoint
// file's bytes.
//
// With -reread FILE it reads FILE with upstream's checkpoint manager
// (checksum verified) and prints the checkpoint upstream writes for the
// same data: dpctl's file must come back byte for byte.
//
// The manager listens on kubelet.sock in -dir: NewManagerImpl has the fixed
// /var/lib/kubelet/device-plugins; the constructor its tests use,
// newManagerImpl (same code, the socket path a parameter), is reached by
// go:linkname (linkname.go), so no root or mount namespace is needed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/admission"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

type scenario struct {
	Name    string              `json:"name"`
	Numa    []int               `json:"numa"`
	Plugins map[string][]string `json:"plugins"`
	Steps   []step              `json:"steps"`
}

type step struct {
	// Start or stop a plugin (SIGTERM).
	Start   string  `json:"start,omitempty"`
	Stop    string  `json:"stop,omitempty"`
	Admit   *v1.Pod `json:"admit,omitempty"`
	Remove  string  `json:"remove,omitempty"`
	Restart bool    `json:"restart,omitempty"`
	// After the step, wait until the resource has this capacity (and
	// allocatable, when given).
	Expect *expect `json:"expect,omitempty"`
	// Also: more resources to wait for.
	Also []expect `json:"also,omitempty"`
}

type expect struct {
	Resource    string `json:"resource"`
	Capacity    int64  `json:"capacity"`
	Allocatable *int64 `json:"allocatable,omitempty"`
	// Written: also wait until the checkpoint file records the resource's
	// allocatable devices (the manager writes it after each device update).
	Written bool `json:"written,omitempty"`
}

// recorded is how many devices of res the checkpoint file records.
func (o *oracle) recorded(res string) int64 {
	b, err := os.ReadFile(filepath.Join(o.dir, "kubelet_internal_checkpoint"))
	if err != nil {
		return -1
	}
	var cp struct {
		Data struct{ RegisteredDevices map[string][]string }
	}
	if json.Unmarshal(b, &cp) != nil {
		return -1
	}
	ids, ok := cp.Data.RegisteredDevices[res]
	if !ok {
		return -1
	}
	return int64(len(ids))
}

type container struct {
	Name string `json:"name"`
	// Run options (GetDeviceRunContainerOptions) or the error getting them.
	Options *devicemanager.DeviceRunContainerOptions `json:"options,omitempty"`
	Error   string                                   `json:"error,omitempty"`
}

type resource struct {
	Capacity    int64 `json:"capacity"`
	Allocatable int64 `json:"allocatable"`
}

type output struct {
	Step       int                 `json:"step"`
	Reason     string              `json:"reason,omitempty"`
	Message    string              `json:"message,omitempty"`
	Containers []container         `json:"containers,omitempty"`
	Resources  map[string]resource `json:"resources"`
	Checkpoint string              `json:"checkpoint"`
}

// noAffinity is the topology manager's store under the none policy: no
// container has a NUMA affinity.
type noAffinity struct{}

func (noAffinity) GetAffinity(klog.Logger, string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noAffinity) GetPolicy() topologymanager.Policy { return nil }
func (noAffinity) Name() string                      { return "none" }

type readySources struct{}

func (readySources) AddSource(string) {}
func (readySources) AllReady() bool   { return true }

type oracle struct {
	dir     string
	numa    []cadvisorapi.Node
	m       *devicemanager.ManagerImpl
	pods    []*v1.Pod
	plugins map[string]*exec.Cmd
	logger  klog.Logger
}

func (o *oracle) activePods() []*v1.Pod { return o.pods }

func (o *oracle) start() error {
	m, err := newManagerImpl(o.logger, filepath.Join(o.dir, "kubelet.sock"), o.numa, noAffinity{})
	if err != nil {
		return err
	}
	if err := m.Start(o.logger, o.activePods, readySources{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return err
	}
	o.m = m
	return nil
}

func (o *oracle) resources() map[string]resource {
	capacity, allocatable, _ := o.m.GetCapacity(o.logger)
	out := map[string]resource{}
	for name, q := range capacity {
		out[string(name)] = resource{Capacity: q.Value(), Allocatable: allocatable.Name(name, q.Format).Value()}
	}
	return out
}

// inode identifies the checkpoint file's current version: the checkpoint
// manager writes a temp file and renames it, so each write is a new inode.
func (o *oracle) inode() uint64 {
	fi, err := os.Stat(filepath.Join(o.dir, "kubelet_internal_checkpoint"))
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// wait waits (with a deadline) until the resource is as expected; with
// Written, until the checkpoint was written after the step began (before:
// the file's inode then) and records the allocatable devices.
func (o *oracle) wait(e *expect, before uint64) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, ok := o.resources()[e.Resource]
		if ok && r.Capacity == e.Capacity && (e.Allocatable == nil || r.Allocatable == *e.Allocatable) &&
			(!e.Written || (o.inode() != before && o.recorded(e.Resource) == r.Allocatable)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %+v not reached in 20s: %v", e.Resource, *e, o.resources())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (o *oracle) admit(ctx context.Context, pod *v1.Pod, out *output) {
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	// The kubelet's pod manager holds the pod before admission: it is
	// among the active pods while its containers are allocated.
	o.pods = append(o.pods, pod)
	for i := range all {
		if err := o.m.Allocate(ctx, pod, &all[i], lifecycle.AddOperation); err != nil {
			r := admission.GetPodAdmitResult(err)
			out.Reason, out.Message = r.Reason, r.Message
			o.pods = o.pods[:len(o.pods)-1]
			return
		}
	}
	for i := range all {
		c := container{Name: all[i].Name}
		opts, err := o.m.GetDeviceRunContainerOptions(ctx, pod, &all[i])
		if err != nil {
			c.Error = err.Error()
		} else {
			c.Options = opts
		}
		out.Containers = append(out.Containers, c)
	}
}

func (o *oracle) stopPlugin(name string) error {
	cmd := o.plugins[name]
	if cmd == nil {
		return fmt.Errorf("plugin %s is not running", name)
	}
	delete(o.plugins, name)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = cmd.Wait()
	return nil
}

func run(sc scenario, dpctl string, dir string) error {
	o := &oracle{dir: dir, plugins: map[string]*exec.Cmd{}, logger: klog.Background()}
	for _, n := range sc.Numa {
		o.numa = append(o.numa, cadvisorapi.Node{Id: n})
	}
	if err := o.start(); err != nil {
		return err
	}
	defer func() {
		for name := range o.plugins {
			_ = o.stopPlugin(name)
		}
		_ = o.m.Stop(o.logger)
	}()
	ctx := klog.NewContext(context.Background(), o.logger)
	enc := json.NewEncoder(os.Stdout)
	for i, st := range sc.Steps {
		out := output{Step: i}
		before := o.inode()
		switch {
		case st.Start != "":
			argv, ok := sc.Plugins[st.Start]
			if !ok {
				return fmt.Errorf("step %d: no plugin %s", i, st.Start)
			}
			args := append(append([]string{}, argv...), "--plugin-dir", dir, "--socket-name", st.Start+".sock")
			cmd := exec.Command(dpctl, args...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			// The plugin ends with the oracle, however the oracle ends.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("step %d: %v", i, err)
			}
			o.plugins[st.Start] = cmd
		case st.Stop != "":
			if err := o.stopPlugin(st.Stop); err != nil {
				return fmt.Errorf("step %d: %v", i, err)
			}
		case st.Admit != nil:
			o.admit(ctx, st.Admit, &out)
		case st.Remove != "":
			kept := o.pods[:0]
			for _, p := range o.pods {
				if string(p.UID) != st.Remove {
					kept = append(kept, p)
				}
			}
			o.pods = kept
			o.m.UpdateAllocatedDevices(o.logger)
		case st.Restart:
			if err := o.m.Stop(o.logger); err != nil {
				return fmt.Errorf("step %d: stop: %v", i, err)
			}
			if err := o.start(); err != nil {
				return fmt.Errorf("step %d: start: %v", i, err)
			}
		default:
			return fmt.Errorf("step %d: nothing to do", i)
		}
		waits := st.Also
		if st.Expect != nil {
			waits = append([]expect{*st.Expect}, waits...)
		}
		for j := range waits {
			if err := o.wait(&waits[j], before); err != nil {
				return fmt.Errorf("step %d: %v", i, err)
			}
		}
		out.Resources = o.resources()
		b, err := os.ReadFile(filepath.Join(dir, "kubelet_internal_checkpoint"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		out.Checkpoint = string(b)
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}

// reread reads a checkpoint file with upstream's checkpoint manager and
// prints what upstream writes for the same data.
func reread(file string) error {
	dir, name := filepath.Split(file)
	cm, err := checkpointmanager.NewCheckpointManager(dir)
	if err != nil {
		return err
	}
	cp := checkpoint.New(make([]checkpoint.PodDevicesEntry, 0), make(map[string][]string))
	if err := cm.GetCheckpoint(name, cp); err != nil {
		return err
	}
	b, err := cp.MarshalCheckpoint()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}

func main() {
	dpctl := flag.String("dpctl", "dpctl", "the plugin program")
	dir := flag.String("dir", "", "the device-plugin directory (kubelet.sock, the checkpoint)")
	rereadFile := flag.String("reread", "", "read this checkpoint with upstream's checkpoint manager and print it as upstream writes it")
	klog.InitFlags(nil)
	flag.Parse()
	if *rereadFile != "" {
		if err := reread(*rereadFile); err != nil {
			fmt.Fprintln(os.Stderr, "devicemanager:", err)
			os.Exit(1)
		}
		return
	}
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		var sc scenario
		if err = json.Unmarshal(data, &sc); err == nil {
			err = run(sc, *dpctl, *dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devicemanager:", err)
		os.Exit(1)
	}
}

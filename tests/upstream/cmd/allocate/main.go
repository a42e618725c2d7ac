// Command allocate is the allocator oracle of dpctl's differential test
// (tests/differential.rs): each line of stdin is one scenario (JSON: the
// node's ResourceSlices, DeviceClasses, claims already allocated and claims
// to allocate, in order); each line of stdout is upstream's answer, from
// k8s.io/dynamic-resource-allocation/structured with the 1.37 feature set
// (DRAConsumableCapacity off on request, as in 1.34–1.35).
//
// The scenario's features are the scheduler's gates: binding conditions
// (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus, beta in
// 1.37) and the alpha DRAListTypeAttributes, DRADeviceCompatibilityGroups and
// DRADerivedAttributes; with any alpha one on, structured picks its
// "experimental" implementation, else "incubating". Each claim's answer is
// its whole AllocationResult (results with tolerations, binding conditions,
// consumed capacity and the form of the share ID; config; node selector).
//
// Claims are allocated one after the other, each in its own Allocate call
// over the state the claims before it left (as kube-scheduler handles the
// claims of different pods): an allocated claim's devices are in use for
// the next one, gathered as the scheduler's GatherAllocatedState does.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type scenario struct {
	Name string `json:"name,omitempty"`
	// BindingConditions: the DRADeviceBindingConditions feature (with
	// DRAResourceClaimDeviceStatus) on or off.
	BindingConditions bool `json:"bindingConditions"`
	// Features: the alpha gates of 1.37 the allocator reads.
	Features struct {
		ListTypeAttributes  bool `json:"listTypeAttributes"`
		CompatibilityGroups bool `json:"compatibilityGroups"`
		DerivedAttributes   bool `json:"derivedAttributes"`
		// ConsumableCapacityOff: DRAConsumableCapacity off, as in 1.34–1.35
		// (with DRAFractionalCapacityRange, which depends on it): with no
		// other beyond-stable feature, structured picks "stable".
		ConsumableCapacityOff bool `json:"consumableCapacityOff"`
	} `json:"features"`
	Node      string                       `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
}

type claimAnswer struct {
	// Outcome: "allocated", "unallocatable" (no solution on the node) or
	// "error" (Allocate failed: a fatal problem of the input).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Allocation: the AllocationResult, each shareID replaced by its form.
	Allocation *resourceapi.AllocationResult `json:"allocation,omitempty"`
}

type answer struct {
	Claims []claimAnswer `json:"claims"`
	// Error: the scenario itself could not be run (bad JSON, a panic).
	Error string `json:"error,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// state is what the scheduler's claim tracker gathers from allocated claims
// (dynamicresources foreachAllocatedDevice; without DRAConsumableCapacity a
// share counts as its whole device, as GatherAllocatedState and
// ListAllAllocatedDevices do).
func state(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	s := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if consumable && r.ShareID != nil {
				s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			s.AllocatedDevices.Insert(id)
		}
	}
	return s
}

// defaults applies what kube-apiserver's v1 defaulting gives a stored claim
// (pkg/apis/resource/v1/defaults.go): allocationMode ExactCount with count 1,
// toleration operator Equal.
func defaults(c *resourceapi.ResourceClaim) {
	exact := func(mode *resourceapi.DeviceAllocationMode, count *int64, tols []resourceapi.DeviceToleration) {
		if *mode == "" {
			*mode = resourceapi.DeviceAllocationModeExactCount
		}
		if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
		for i := range tols {
			if tols[i].Operator == "" {
				tols[i].Operator = resourceapi.DeviceTolerationOpEqual
			}
		}
	}
	for i := range c.Spec.Devices.Requests {
		r := &c.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			exact(&r.Exactly.AllocationMode, &r.Exactly.Count, r.Exactly.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			exact(&s.AllocationMode, &s.Count, s.Tolerations)
		}
	}
}

func shareForm(id string) string {
	if id == "" {
		return ""
	}
	// The form of types.UID from uuid.NewUUID: 8-4-4-4-12 lowercase hex.
	if len(id) != 36 {
		return "other:" + id
	}
	for i, c := range id {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (c == '-') || (!dash && !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
			return "other:" + id
		}
	}
	return "uuid"
}

func run(sc *scenario) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{Error: fmt.Sprintf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	features := structured.Features{
		AdminAccess:             true,
		PrioritizedList:         true,
		PartitionableDevices:    true,
		DeviceTaints:            true,
		ConsumableCapacity:      !sc.Features.ConsumableCapacityOff,
		FractionalCapacityRange: !sc.Features.ConsumableCapacityOff,
		DeviceBindingAndStatus:  sc.BindingConditions,
		ListTypeAttributes:      sc.Features.ListTypeAttributes,
		CompatibilityGroups:     sc.Features.CompatibilityGroups,
		DerivedAttributes:       sc.Features.DerivedAttributes,
	}
	classes := classLister{}
	for _, c := range sc.Classes {
		classes[c.Name] = c
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: sc.Node, Labels: map[string]string{"kubernetes.io/hostname": sc.Node}}}
	cache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: !sc.Features.ConsumableCapacityOff, EnableListTypeAttributes: sc.Features.ListTypeAttributes})
	allocated := append([]*resourceapi.ResourceClaim{}, sc.Allocated...)
	ctx := context.Background()
	for _, claim := range sc.Claims {
		defaults(claim)
		alloc, err := structured.NewAllocator(ctx, features, state(allocated, !sc.Features.ConsumableCapacityOff), classes, sc.Slices, cache)
		if err != nil {
			a.Claims = append(a.Claims, claimAnswer{Outcome: "error", Error: err.Error()})
			continue
		}
		res, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		switch {
		case err != nil && errors.Is(err, structured.ErrFailedAllocationOnNode):
			a.Claims = append(a.Claims, claimAnswer{Outcome: "unallocatable", Error: err.Error()})
			continue
		case err != nil:
			a.Claims = append(a.Claims, claimAnswer{Outcome: "error", Error: err.Error()})
			continue
		case len(res) == 0:
			a.Claims = append(a.Claims, claimAnswer{Outcome: "unallocatable"})
			continue
		}
		shown := res[0].DeepCopy()
		for i := range shown.Devices.Results {
			if id := shown.Devices.Results[i].ShareID; id != nil {
				form := types.UID(shareForm(string(*id)))
				shown.Devices.Results[i].ShareID = &form
			}
		}
		a.Claims = append(a.Claims, claimAnswer{Outcome: "allocated", Allocation: shown})
		done := claim.DeepCopy()
		done.Status.Allocation = &res[0]
		allocated = append(allocated, done)
	}
	return a
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var sc scenario
		var a answer
		if err := json.Unmarshal(in.Bytes(), &sc); err != nil {
			a = answer{Error: "scenario: " + err.Error()}
		} else {
			a = run(&sc)
		}
		if err := enc.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "allocate:", err)
			os.Exit(1)
		}
		// One answer per line, flushed: the caller may wait for it.
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "allocate: stdin:", err)
		os.Exit(1)
	}
}

package main

// What differs between the Kubernetes releases this oracle is built
// against: this file is 1.37's (k8s-1.36/cmd/controlplane/compat.go is
// 1.36's; main.go is shared, linked there).

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/devicetainteviction"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"k8s.io/kubernetes/pkg/scheduler"
)

// schedulerInformers is kube-scheduler's informer factory.
func schedulerInformers(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0, nil)
}

// claimController is the resourceclaim controller as kube-controller-manager
// constructs it (1.37: PodGroups are scheduling.k8s.io/v1beta1).
func claimController(client kubernetes.Interface, f informers.SharedInformerFactory) (*resourceclaim.Controller, error) {
	return resourceclaim.NewController(klog.Background(), client,
		f.Core().V1().Pods(),
		f.Scheduling().V1beta1().PodGroups(),
		f.Resource().V1().ResourceClaims(),
		f.Resource().V1().ResourceClaimTemplates())
}

// taintEvictionController is the device-taint eviction controller (1.37:
// DeviceTaintRules are resource.k8s.io/v1).
func taintEvictionController(client kubernetes.Interface, f informers.SharedInformerFactory) *devicetainteviction.Controller {
	return devicetainteviction.New(client,
		f.Core().V1().Pods(),
		f.Resource().V1().ResourceClaims(),
		f.Resource().V1().ResourceSlices(),
		f.Resource().V1().DeviceTaintRules(),
		f.Resource().V1().DeviceClasses(),
		"device-taint-eviction-controller")
}

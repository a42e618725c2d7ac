package main

// What differs between the Kubernetes releases this oracle is built
// against: this file is 1.36's (main.go is the current module's, linked).

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/devicetainteviction"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler"
)

// schedulerInformers is kube-scheduler's informer factory (1.36: no dynamic informers argument).
func schedulerInformers(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0)
}

// claimController is the resourceclaim controller as 1.36's
// kube-controller-manager constructs it (cmd/kube-controller-manager/app/resource.go:
// its features from the gates, PodGroups scheduling.k8s.io/v1alpha2).
func claimController(client kubernetes.Interface, f informers.SharedInformerFactory) (*resourceclaim.Controller, error) {
	return resourceclaim.NewController(klog.Background(),
		resourceclaim.Features{
			AdminAccess:            utilfeature.DefaultFeatureGate.Enabled(features.DRAAdminAccess),
			PrioritizedList:        utilfeature.DefaultFeatureGate.Enabled(features.DRAPrioritizedList),
			WorkloadResourceClaims: utilfeature.DefaultFeatureGate.Enabled(features.DRAWorkloadResourceClaims),
		},
		client,
		f.Core().V1().Pods(),
		f.Scheduling().V1alpha2().PodGroups(),
		f.Resource().V1().ResourceClaims(),
		f.Resource().V1().ResourceClaimTemplates())
}

// taintEvictionController is the device-taint eviction controller (1.36:
// DeviceTaintRules are resource.k8s.io/v1beta2, and the gate is an argument).
func taintEvictionController(client kubernetes.Interface, f informers.SharedInformerFactory) *devicetainteviction.Controller {
	return devicetainteviction.New(client,
		f.Core().V1().Pods(),
		f.Resource().V1().ResourceClaims(),
		f.Resource().V1().ResourceSlices(),
		f.Resource().V1beta2().DeviceTaintRules(),
		f.Resource().V1().DeviceClasses(),
		"device-taint-eviction-controller",
		utilfeature.DefaultFeatureGate.Enabled(features.DRAWorkloadResourceClaims))
}

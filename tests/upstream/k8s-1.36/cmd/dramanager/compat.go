package main

// What differs between the Kubernetes releases this oracle is built
// against: this file is 1.36's (main.go is the current module's, linked).

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// RegisterPlugin is the DRA handler's, announced to the oracle (1.36: no context).
func (a announcing) RegisterPlugin(name, endpoint string, versions []string, timeout *time.Duration) error {
	return a.announce(a.PluginHandler.RegisterPlugin(name, endpoint, versions, timeout))
}

// stopManager: 1.36's manager has no Stop; cancelling Start's context stops it.
func stopManager(*dra.Manager) {}

// updateStatus is UpdateAllocatedResourcesStatus (1.36: no logger).
func updateStatus(m *dra.Manager, pod *v1.Pod, status *v1.PodStatus) {
	m.UpdateAllocatedResourcesStatus(pod, status)
}

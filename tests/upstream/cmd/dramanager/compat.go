package main

// What differs between the Kubernetes releases this oracle is built
// against: this file is the current release's (the module in tests/upstream);
// tests/upstream/k8s-1.36 builds main.go with its own compat.go.

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
)

// RegisterPlugin is the DRA handler's, announced to the oracle.
func (a announcing) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	return a.announce(a.PluginHandler.RegisterPlugin(ctx, name, endpoint, versions, timeout))
}

// stopManager stops the manager (1.37: Stop).
func stopManager(m *dra.Manager) { m.Stop() }

// updateStatus is UpdateAllocatedResourcesStatus (1.37: with a logger).
func updateStatus(m *dra.Manager, pod *v1.Pod, status *v1.PodStatus) {
	m.UpdateAllocatedResourcesStatus(klog.Background(), pod, status)
}

#!/usr/bin/env python3
"""Interop peer written with grpcio: an independent implementation of the
device-plugin protocol roles, driven by dpctl's interop tests.

  peer.py plugin --socket PATH --resource R [--kubelet-socket K] [--devices N]
                 [--preferred] [--prestart] [--fail CODE:MSG] [--close-after N]
  peer.py kubelet --dir DIR
  peer.py podresources --socket PATH
  peer.py podresources-client --socket PATH

Events go to stdout as JSON lines; commands come on stdin, one per line
(plugin: "health ID Healthy|Unhealthy"; kubelet: "allocate ID,ID",
"preferred AVAIL MUST SIZE" with "-" for an empty list, "restart").
The generated modules (deviceplugin.v1beta1.api_pb2 …) are made from proto/ by setup.sh.
"""
import argparse
import json
import os
import stat
import sys
import threading
from concurrent import futures

import grpc

from deviceplugin.v1beta1 import api_pb2 as dp
from deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from podresources.v1 import api_pb2 as pr
from podresources.v1 import api_pb2_grpc as pr_grpc

LOCK = threading.Lock()


def emit(**event):
    with LOCK:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()


def parse_list(s):
    return [] if s in ("", "-") else s.split(",")


# --- plugin ------------------------------------------------------------------

class Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, args):
        self.args = args
        self.cond = threading.Condition()
        self.version = 0
        self.devices = [
            dp.Device(ID="p-%d" % i, health="Healthy",
                      topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i * 2 // args.devices)]))
            for i in range(args.devices)
        ]

    def set_health(self, dev_id, health):
        with self.cond:
            for d in self.devices:
                if d.ID == dev_id:
                    d.health = health
            self.version += 1
            self.cond.notify_all()

    def GetDevicePluginOptions(self, request, context):
        emit(event="call", method="GetDevicePluginOptions")
        return dp.DevicePluginOptions(pre_start_required=self.args.prestart,
                                      get_preferred_allocation_available=self.args.preferred)

    def ListAndWatch(self, request, context):
        emit(event="call", method="ListAndWatch")
        sent = 0
        seen = -1
        while context.is_active():
            with self.cond:
                if seen == self.version:
                    self.cond.wait(timeout=0.2)
                    continue
                seen = self.version
                devices = list(self.devices)
            yield dp.ListAndWatchResponse(devices=devices)
            sent += 1
            if self.args.close_after and sent >= self.args.close_after:
                return

    def GetPreferredAllocation(self, request, context):
        out = []
        for c in request.container_requests:
            emit(event="call", method="GetPreferredAllocation", available=list(c.available_deviceIDs),
                 mustInclude=list(c.must_include_deviceIDs), size=c.allocation_size)
            ids = list(c.must_include_deviceIDs)
            for a in c.available_deviceIDs:
                if len(ids) < c.allocation_size and a not in ids:
                    ids.append(a)
            out.append(dp.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return dp.PreferredAllocationResponse(container_responses=out)

    def Allocate(self, request, context):
        ids = [list(c.devices_ids) for c in request.container_requests]
        emit(event="call", method="Allocate", ids=ids)
        if self.args.fail:
            code, msg = self.args.fail.split(":", 1)
            context.abort(getattr(grpc.StatusCode, code), msg)
        resps = []
        for c in request.container_requests:
            r = dp.ContainerAllocateResponse()
            r.envs["PEER_DEVICES"] = ",".join(c.devices_ids)
            r.annotations["peer"] = "python"
            r.mounts.append(dp.Mount(container_path="/peer", host_path="/tmp", read_only=True))
            for d in c.devices_ids:
                r.devices.append(dp.DeviceSpec(container_path="/dev/" + d, host_path="/dev/null", permissions="rw"))
                r.cdi_devices.append(dp.CDIDevice(name="vendor.example/peer=" + d))
            resps.append(r)
        return dp.AllocateResponse(container_responses=resps)

    def PreStartContainer(self, request, context):
        emit(event="call", method="PreStartContainer", ids=list(request.devices_ids))
        return dp.PreStartContainerResponse()


def run_plugin(args):
    plugin = Plugin(args)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    dp_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    if args.kubelet_socket:
        # grpcio sends "path%2Fto%2Fkubelet.sock" as :authority for this target.
        with grpc.insecure_channel("unix:" + args.kubelet_socket) as ch:
            dp_grpc.RegistrationStub(ch).Register(dp.RegisterRequest(
                version="v1beta1", endpoint=os.path.basename(args.socket), resource_name=args.resource,
                options=dp.DevicePluginOptions(pre_start_required=args.prestart,
                                               get_preferred_allocation_available=args.preferred)), timeout=20)
        emit(event="registered")
    emit(event="ready")
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "health":
            plugin.set_health(parts[1], parts[2])
            emit(event="health", id=parts[1], health=parts[2])
    server.stop(0)


# --- kubelet -----------------------------------------------------------------

def device_json(d):
    return {"id": d.ID, "health": d.health, "numa": [n.ID for n in d.topology.nodes]}


class Kubelet(dp_grpc.RegistrationServicer):
    def __init__(self, directory):
        self.dir = directory
        self.stub = None

    def Register(self, request, context):
        emit(event="register", resource=request.resource_name, endpoint=request.endpoint, version=request.version,
             options={"preStartRequired": request.options.pre_start_required,
                      "getPreferredAllocationAvailable": request.options.get_preferred_allocation_available})
        ch = grpc.insecure_channel("unix:" + os.path.join(self.dir, request.endpoint),
                                   options=[("grpc.default_authority", "localhost")])
        stub = dp_grpc.DevicePluginStub(ch)
        try:
            o = stub.GetDevicePluginOptions(dp.Empty(), timeout=10)
        except grpc.RpcError as e:
            context.abort(grpc.StatusCode.UNKNOWN, "failed to get device plugin options: %s" % e.details())
        emit(event="options", preStartRequired=o.pre_start_required,
             getPreferredAllocationAvailable=o.get_preferred_allocation_available)
        self.stub = stub

        def watch():
            try:
                for resp in stub.ListAndWatch(dp.Empty()):
                    emit(event="snapshot", devices=[device_json(d) for d in resp.devices])
                emit(event="stream-ended")
            except grpc.RpcError as e:
                emit(event="stream-ended", code=e.code().name)

        threading.Thread(target=watch, daemon=True).start()
        return dp.Empty()


def start_kubelet(k):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    dp_grpc.add_RegistrationServicer_to_server(k, server)
    server.add_insecure_port("unix:" + os.path.join(k.dir, "kubelet.sock"))
    server.start()
    return server


def delete_sockets(directory):
    for name in os.listdir(directory):
        p = os.path.join(directory, name)
        if stat.S_ISSOCK(os.lstat(p).st_mode):
            os.remove(p)


def run_kubelet(args):
    k = Kubelet(args.dir)
    delete_sockets(args.dir)
    server = start_kubelet(k)
    emit(event="ready")
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "allocate":
                r = k.stub.Allocate(dp.AllocateRequest(container_requests=[
                    dp.ContainerAllocateRequest(devices_ids=parse_list(parts[1]))]), timeout=10)
                c = r.container_responses[0]
                emit(event="allocate", response={
                    "envs": dict(c.envs), "annotations": dict(c.annotations),
                    "mounts": [[m.container_path, m.host_path, m.read_only] for m in c.mounts],
                    "devices": [[d.container_path, d.host_path, d.permissions] for d in c.devices],
                    "cdi": [d.name for d in c.cdi_devices]})
            elif parts[0] == "preferred":
                r = k.stub.GetPreferredAllocation(dp.PreferredAllocationRequest(container_requests=[
                    dp.ContainerPreferredAllocationRequest(available_deviceIDs=parse_list(parts[1]),
                                                           must_include_deviceIDs=parse_list(parts[2]),
                                                           allocation_size=int(parts[3]))]), timeout=10)
                emit(event="preferred", ids=list(r.container_responses[0].deviceIDs))
            elif parts[0] == "prestart":
                k.stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=parse_list(parts[1])), timeout=10)
                emit(event="prestart")
            elif parts[0] == "restart":
                server.stop(0).wait()
                delete_sockets(args.dir)
                server = start_kubelet(k)
                emit(event="restarted")
        except grpc.RpcError as e:
            emit(event="error", code=e.code().name, message=e.details())
    server.stop(0)


# --- podresources --------------------------------------------------------------

def topo(n):
    return pr.TopologyInfo(nodes=[pr.NUMANode(ID=n)])


POD = pr.PodResources(name="interop-pod", namespace="default", containers=[pr.ContainerResources(
    name="main",
    devices=[pr.ContainerDevices(resource_name="vendor.example/peer", device_ids=["p-0", "p-1"], topology=topo(0))],
    cpu_ids=[1, 2],
    memory=[pr.ContainerMemory(memory_type="memory", size=1073741824, topology=topo(0))],
    dynamic_resources=[pr.DynamicResource(claim_name="gpu-claim", claim_namespace="default", claim_resources=[
        pr.ClaimResource(cdi_devices=[pr.CDIDevice(name="vendor.example/peer=p-9")], driver_name="drv",
                         pool_name="pool", device_name="dev", share_id="share-1")])])])


class PodResources(pr_grpc.PodResourcesListerServicer):
    def List(self, request, context):
        emit(event="call", method="List")
        return pr.ListPodResourcesResponse(pod_resources=[POD])

    def GetAllocatableResources(self, request, context):
        return pr.AllocatableResourcesResponse(
            devices=[pr.ContainerDevices(resource_name="vendor.example/peer", device_ids=["p-%d" % i], topology=topo(i // 2))
                     for i in range(4)],
            cpu_ids=[0, 1, 2, 3],
            memory=[pr.ContainerMemory(memory_type="memory", size=4294967296, topology=topo(0))])

    def Get(self, request, context):
        if request.pod_name == POD.name and request.pod_namespace == POD.namespace:
            return pr.GetPodResourcesResponse(pod_resources=POD)
        context.abort(grpc.StatusCode.NOT_FOUND, "pod %s in namespace %s not found" % (request.pod_name, request.pod_namespace))


def run_podresources(args):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pr_grpc.add_PodResourcesListerServicer_to_server(PodResources(), server)
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    emit(event="ready")
    for _ in sys.stdin:
        pass
    server.stop(0)


def run_podresources_client(args):
    # A monitoring agent: grpcio sends "path%2Fto%2Fkubelet.sock" as :authority.
    with grpc.insecure_channel("unix:" + args.socket) as ch:
        stub = pr_grpc.PodResourcesListerStub(ch)
        resp = stub.List(pr.ListPodResourcesRequest(), timeout=10)
        alloc = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=10)
    emit(event="list", pods=[{"name": p.name, "namespace": p.namespace, "containers": [
        {"name": c.name, "devices": [{"resource": d.resource_name, "ids": list(d.device_ids),
                                      "numa": [n.ID for n in d.topology.nodes]} for d in c.devices]}
        for c in p.containers]} for p in resp.pod_resources])
    emit(event="allocatable", ids=sorted(i for d in alloc.devices for i in d.device_ids))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="role", required=True)
    p = sub.add_parser("plugin")
    p.add_argument("--socket", required=True)
    p.add_argument("--resource", default="vendor.example/peer")
    p.add_argument("--kubelet-socket")
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--preferred", action="store_true")
    p.add_argument("--prestart", action="store_true")
    p.add_argument("--fail")
    p.add_argument("--close-after", type=int, default=0)
    k = sub.add_parser("kubelet")
    k.add_argument("--dir", required=True)
    r = sub.add_parser("podresources")
    r.add_argument("--socket", required=True)
    c = sub.add_parser("podresources-client")
    c.add_argument("--socket", required=True)
    args = ap.parse_args()
    {"plugin": run_plugin, "kubelet": run_kubelet, "podresources": run_podresources,
     "podresources-client": run_podresources_client}[args.role](args)


if __name__ == "__main__":
    main()

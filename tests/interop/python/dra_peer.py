#!/usr/bin/env python3
"""DRA interop peer written with grpcio: an independent implementation of
both sides of the DRA kubelet-plugin protocol, driven by dpctl's interop tests.

  dra_peer.py driver --root KUBELET_ROOT --driver NAME [--devices N] [--cdi-dir DIR]
  dra_peer.py kubelet --root KUBELET_ROOT

driver: a DRA driver's kubelet plugin: the plugin-watcher registration socket
  <root>/plugins_registry/NAME-reg.sock (GetInfo, NotifyRegistrationStatus) and
  the service socket <root>/plugins/NAME/dra.sock serving v1.DRAPlugin and
  v1alpha1.DRAResourceHealth; with --cdi-dir it writes a CDI spec per prepared
  claim there. stdin: "health DEVICE HEALTHY|UNHEALTHY".
kubelet: the kubelet's side: finds registration sockets in
  <root>/plugins_registry, calls GetInfo, NotifyRegistrationStatus, dials the
  endpoint, opens the health stream it advertises (v1 preferred). stdin:
  "prepare NS/NAME/UID[,…]", "unprepare NS/NAME/UID[,…]".

Events go to stdout as JSON lines. The generated modules (dra.v1.api_pb2 …)
are made from proto/ by setup.sh.
"""
import argparse
import json
import os
import stat
import sys
import threading
import time
from concurrent import futures

import grpc

from dra.v1 import api_pb2 as dra
from dra.v1 import api_pb2_grpc as dra_grpc
from dra_health.v1 import api_pb2 as h1
from dra_health.v1 import api_pb2_grpc as h1_grpc
from dra_health.v1alpha1 import api_pb2 as ha
from dra_health.v1alpha1 import api_pb2_grpc as ha_grpc
from pluginregistration.v1 import api_pb2 as reg
from pluginregistration.v1 import api_pb2_grpc as reg_grpc

LOCK = threading.Lock()


def emit(**event):
    with LOCK:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()


def claims_of(text):
    out = []
    for c in text.split(","):
        ns, name, uid = c.split("/")
        out.append(dra.Claim(namespace=ns, name=name, uid=uid))
    return out


# --- driver ------------------------------------------------------------------

class Driver(dra_grpc.DRAPluginServicer, ha_grpc.DRAResourceHealthServicer, reg_grpc.RegistrationServicer):
    def __init__(self, args, endpoint):
        self.args = args
        self.endpoint = endpoint
        self.cond = threading.Condition()
        self.version = 0
        self.health = {"gpu-%d" % i: ha.HEALTHY for i in range(args.devices)}
        self.prepared = {}

    # Registration (plugin watcher)
    def GetInfo(self, request, context):
        emit(event="call", method="GetInfo")
        return reg.PluginInfo(type="DRAPlugin", name=self.args.driver, endpoint=self.endpoint,
                              supported_versions=["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"])

    def NotifyRegistrationStatus(self, request, context):
        emit(event="registration-status", registered=request.plugin_registered, error=request.error)
        return reg.RegistrationStatusResponse()

    # DRAPlugin v1
    def NodePrepareResources(self, request, context):
        emit(event="call", method="NodePrepareResources", uids=[c.uid for c in request.claims])
        resp = dra.NodePrepareResourcesResponse()
        for c in request.claims:
            dev = self.prepared.get(c.uid)
            if dev is None:
                free = [d for d in sorted(self.health) if d not in self.prepared.values()]
                if not free:
                    resp.claims[c.uid].error = "no free device"
                    continue
                dev = free[0]
                self.prepared[c.uid] = dev
            if self.args.cdi_dir:
                os.makedirs(self.args.cdi_dir, exist_ok=True)
                with open(os.path.join(self.args.cdi_dir, "peer-%s.json" % c.uid), "w") as f:
                    json.dump({"cdiVersion": "0.6.0", "kind": "peer.example.com/gpu",
                               "devices": [{"name": dev, "containerEdits": {"env": ["PEER_GPU=" + dev]}}]}, f)
            resp.claims[c.uid].devices.append(dra.Device(
                pool_name="peer-pool", device_name=dev,
                cdi_device_ids=["peer.example.com/gpu=%s" % dev]))
        return resp

    def NodeUnprepareResources(self, request, context):
        emit(event="call", method="NodeUnprepareResources", uids=[c.uid for c in request.claims])
        resp = dra.NodeUnprepareResourcesResponse()
        for c in request.claims:
            self.prepared.pop(c.uid, None)
            if self.args.cdi_dir:
                try:
                    os.remove(os.path.join(self.args.cdi_dir, "peer-%s.json" % c.uid))
                except FileNotFoundError:
                    pass
            resp.claims[c.uid].error = ""
        return resp

    # DRAResourceHealth v1alpha1
    def NodeWatchResources(self, request, context):
        emit(event="call", method="NodeWatchResources")
        seen = -1
        while context.is_active():
            with self.cond:
                if seen == self.version:
                    self.cond.wait(timeout=0.2)
                    continue
                seen = self.version
                snap = dict(self.health)
            now = int(time.time())
            yield ha.NodeWatchResourcesResponse(devices=[
                ha.DeviceHealth(device=ha.DeviceIdentifier(pool_name="peer-pool", device_name=d),
                                health=h, last_updated_time=now)
                for d, h in sorted(snap.items())])

    def set_health(self, dev, health):
        with self.cond:
            self.health[dev] = ha.HEALTHY if health == "HEALTHY" else ha.UNHEALTHY
            self.version += 1
            self.cond.notify_all()


def run_driver(args):
    plugin_dir = os.path.join(args.root, "plugins", args.driver)
    reg_dir = os.path.join(args.root, "plugins_registry")
    os.makedirs(plugin_dir, exist_ok=True)
    os.makedirs(reg_dir, exist_ok=True)
    endpoint = os.path.join(plugin_dir, "dra.sock")
    d = Driver(args, endpoint)
    svc = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    dra_grpc.add_DRAPluginServicer_to_server(d, svc)
    ha_grpc.add_DRAResourceHealthServicer_to_server(d, svc)
    svc.add_insecure_port("unix://" + endpoint)
    svc.start()
    regsvc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    reg_grpc.add_RegistrationServicer_to_server(d, regsvc)
    regsvc.add_insecure_port("unix://" + os.path.join(reg_dir, args.driver + "-reg.sock"))
    regsvc.start()
    emit(event="serving", endpoint=endpoint)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "health":
            d.set_health(parts[1], parts[2])
            emit(event="health-set", device=parts[1], health=parts[2])
    svc.stop(0)
    regsvc.stop(0)


# --- kubelet -----------------------------------------------------------------

def run_kubelet(args):
    reg_dir = os.path.join(args.root, "plugins_registry")
    found = None
    while found is None:
        for name in sorted(os.listdir(reg_dir)) if os.path.isdir(reg_dir) else []:
            p = os.path.join(reg_dir, name)
            if not name.startswith(".") and stat.S_ISSOCK(os.stat(p).st_mode):
                found = p
                break
        if found is None:
            time.sleep(0.05)
    ch = grpc.insecure_channel("unix://" + found)
    info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=5)
    versions = list(info.supported_versions)
    emit(event="info", type=info.type, name=info.name, endpoint=info.endpoint, versions=versions)
    ok = info.type == "DRAPlugin" and "v1.DRAPlugin" in versions
    reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
        reg.RegistrationStatus(plugin_registered=ok, error="" if ok else "unsupported"), timeout=5)
    svc = grpc.insecure_channel("unix://" + info.endpoint)
    stub = dra_grpc.DRAPluginStub(svc)
    if "v1.DRAResourceHealth" in versions:
        stream = h1_grpc.DRAResourceHealthStub(svc).NodeWatchResources(h1.NodeWatchResourcesRequest())
        words = {0: "Unknown", 1: "Healthy", 2: "Unhealthy"}
    elif "v1alpha1.DRAResourceHealth" in versions:
        stream = ha_grpc.DRAResourceHealthStub(svc).NodeWatchResources(ha.NodeWatchResourcesRequest())
        words = {0: "Unknown", 1: "Healthy", 2: "Unhealthy"}
    else:
        stream = None

    def watch():
        try:
            for snap in stream:
                emit(event="health", devices={"%s/%s" % (d.device.pool_name, d.device.device_name): words.get(d.health, "?")
                                              for d in snap.devices},
                     messages={d.device.device_name: d.message for d in snap.devices if d.message})
        except grpc.RpcError as e:
            emit(event="health-ended", code=str(e.code()))

    if stream is not None:
        threading.Thread(target=watch, daemon=True).start()
    emit(event="registered", driver=info.name)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            if parts[0] == "prepare":
                r = stub.NodePrepareResources(dra.NodePrepareResourcesRequest(claims=claims_of(parts[1])), timeout=10)
                emit(event="prepared", claims={uid: {"error": c.error, "devices": [
                    {"pool": d.pool_name, "device": d.device_name, "cdi": list(d.cdi_device_ids)} for d in c.devices]}
                    for uid, c in r.claims.items()})
            elif parts[0] == "unprepare":
                r = stub.NodeUnprepareResources(dra.NodeUnprepareResourcesRequest(claims=claims_of(parts[1])), timeout=10)
                emit(event="unprepared", claims={uid: c.error for uid, c in r.claims.items()})
        except grpc.RpcError as e:
            emit(event="error", code=str(e.code()), message=e.details())


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="role", required=True)
    d = sub.add_parser("driver")
    d.add_argument("--root", required=True)
    d.add_argument("--driver", required=True)
    d.add_argument("--devices", type=int, default=2)
    d.add_argument("--cdi-dir")
    k = sub.add_parser("kubelet")
    k.add_argument("--root", required=True)
    args = ap.parse_args()
    if args.role == "driver":
        run_driver(args)
    else:
        run_kubelet(args)


if __name__ == "__main__":
    main()

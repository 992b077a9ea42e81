"""Shared benchmark machinery: an isolated environment, timing, statistics, tables and results.

Every benchmark runs in its own process with its own temporary folder (SQLite database in WAL mode,
embedded Chroma folder, secret key), configured through the environment before `django.setup()`,
so it never touches a developer's `var/` data. Results are appended to
`bench/results/latest.json` as `{name, figures, baseline, ratio, target, met}` records.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
RESULTS_FILE = RESULTS_DIR / "latest.json"
RUN_FILE = RESULTS_DIR / "run.json"
CACHE_DIR = RESULTS_DIR / "cache"
SHARED_MODEL = (ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2").resolve()
BENCH_AUDIT_KEY = "bench-audit-key-not-a-secret"


# --- environment --------------------------------------------------------------------------------


def model_dir() -> Path:
    """The embedding model the benchmarks use: MEMCONSOLE_MODEL_DIR, else ../shared/models, else var/."""
    configured = os.environ.get("MEMCONSOLE_MODEL_DIR")
    if configured:
        return Path(configured)
    if (SHARED_MODEL / "model.onnx").is_file():
        return SHARED_MODEL
    return ROOT / "var" / "models" / "all-MiniLM-L6-v2"


def bench_environment(
    workdir: Path, database_url: str = "", chroma_host: str = "", chroma_port: int = 0
) -> dict[str, str]:
    """The environment a benchmark's Django (or its server) runs with: everything under `workdir`."""
    env = {
        "DJANGO_SETTINGS_MODULE": "memconsole.settings",
        "MEMCONSOLE_ENV": "local",
        "DEBUG": "0",
        "MEMCONSOLE_VAR_DIR": str(workdir / "var"),
        "CHROMA_PATH": str(workdir / "chroma"),
        "CHROMA_HOST": chroma_host,
        "MEMCONSOLE_MODEL_DIR": str(model_dir()),
        "MEMCONSOLE_FERNET_KEYS": "",
        "MEMCONSOLE_AUDIT_KEY": BENCH_AUDIT_KEY,
        "MEMCONSOLE_LOG_LEVEL": "WARNING",
        "MEMCONSOLE_STATIC_ROOT": str(workdir / "static"),
        "ANONYMIZED_TELEMETRY": "False",
        # A load test must measure the service, not the rate limiter.
        "MEMCONSOLE_API_RATE_PER_MINUTE": "100000000",
        "DATABASE_URL": database_url,
    }
    if chroma_port:
        env["CHROMA_PORT"] = str(chroma_port)
    return env


def setup_django(
    workdir: Path, database_url: str = "", chroma_host: str = "", chroma_port: int = 0, migrate: bool = True
) -> None:
    """Point this process at `workdir` (never var/), set Django up and migrate a fresh database."""
    for name in ("DATABASE_URL", "CHROMA_HOST", "CHROMA_PORT", "MEMCONSOLE_FERNET_KEYS"):
        os.environ.pop(name, None)
    for name in ("MEMCONSOLE_FERNET_KEYS_FILE", "DATABASE_URL_FILE", "SECRET_KEY_FILE"):
        os.environ.pop(name, None)
    for name, value in bench_environment(workdir, database_url, chroma_host, chroma_port).items():
        if value or name not in ("DATABASE_URL", "CHROMA_HOST"):
            os.environ[name] = value
    (workdir / "static").mkdir(parents=True, exist_ok=True)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


@contextmanager
def workspace(keep: bool = False, prefix: str = "memconsole-bench-") -> Iterator[Path]:
    """A temporary folder for one benchmark's database and index, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            print(f"(kept {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


def require_real_model() -> str:
    """The current model id; exits when only the lexical fallback is available."""
    from memconsole.lib import embeddings

    embedder = embeddings.get_embedder()
    if embedder.is_fallback:
        sys.exit(f"bench: no embedding model in {model_dir()}; set MEMCONSOLE_MODEL_DIR (see README)")
    return embedder.model_id


# --- timing -------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall-clock samples in seconds."""

    samples: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def p95_ms(self) -> float:
        return percentile(self.samples, 95) * 1000

    @property
    def p99_ms(self) -> float:
        return percentile(self.samples, 99) * 1000

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples) * 1000

    def summary(self) -> dict[str, float]:
        return {"median_ms": round(self.median_ms, 3), "p95_ms": round(self.p95_ms, 3), "n": len(self.samples)}


def percentile(samples: Iterable[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p95 is a latency that happened)."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(-(-pct * len(ordered) // 100))))
    return ordered[rank - 1]


def measure(fn: Callable[[], Any], repeat: int, warmup: int = 2) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing(samples)


def measure_each(fn: Callable[[Any], Any], inputs: list[Any], warmup: int = 2) -> Timing:
    """Time `fn(x)` once for each input (e.g. one query each)."""
    for x in inputs[:warmup]:
        fn(x)
    samples = []
    for x in inputs:
        start = time.perf_counter()
        fn(x)
        samples.append(time.perf_counter() - start)
    return Timing(samples)


def interleaved(methods: dict[str, Callable[..., object]], inputs: list[Any], warmup: int = 2) -> dict[str, Timing]:
    """Time every method on each input in turn (A, B, C on input 1, then on input 2...), so that a
    change in machine load during the run touches every method alike. Each method is called with one
    input (`...`: some bind a loop variable as a default argument)."""
    for x in inputs[:warmup]:
        for fn in methods.values():
            fn(x)
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for x in inputs:
        for name, fn in methods.items():
            start = time.perf_counter()
            fn(x)
            samples[name].append(time.perf_counter() - start)
    return {name: Timing(values) for name, values in samples.items()}


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """`with stopwatch() as elapsed: ...` then `elapsed()` gives seconds."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def progress(message: str) -> None:
    print(f"  .. {message}", flush=True)


# --- results ------------------------------------------------------------------------------------


@dataclass
class Record:
    """One benchmark result. `baseline` = {"name", "figures", "ratio_of"}; `ratio` as `ratio_of` says."""

    name: str
    figures: dict[str, Any]
    baseline: dict[str, Any]
    ratio: float | None
    target: str
    met: bool | None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("notes")
        return data


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator to 3 significant digits (None when undefined)."""
    if not denominator:
        return None
    return float(f"{numerator / denominator:.3g}")


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(out)


def print_record(record: Record) -> None:
    base = record.baseline.get("figures", {})
    keys = list(dict.fromkeys([*record.figures, *base]))
    rows = [[key, record.figures.get(key), base.get(key)] for key in keys]
    print()
    print(f"== {record.name}")
    print(table(["figure", "memconsole", f"baseline: {record.baseline.get('name', '-')}"], rows))
    ratio_text = "-" if record.ratio is None else f"{record.ratio:g}"
    print(f"ratio {ratio_text}  ({record.baseline.get('ratio_of', '')})")
    met = "n/a" if record.met is None else ("yes" if record.met else "NO")
    print(f"target {record.target}  ->  met: {met}")
    for note in record.notes:
        print(f"note: {note}")
    sys.stdout.flush()


def save_record(record: Record, path: Path = RESULTS_FILE) -> None:
    """Add `record` to the results file, replacing an earlier record of the same name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    if path.exists():
        try:
            records = json.loads(path.read_text())
        except ValueError:
            records = []
    records = [r for r in records if r.get("name") != record.name]
    records.append(record.as_json())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def report(record: Record) -> Record:
    print_record(record)
    save_record(record)
    return record


# --- machine ------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def git_state() -> dict[str, Any]:
    """The commit measured and how many files differed from it (others edit the tree live)."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return ""

    changed = [line for line in git("status", "--porcelain").splitlines() if line and not line.startswith("??")]
    return {"commit": git("rev-parse", "--short", "HEAD"), "modified_files": len(changed)}


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_busy_seconds() -> float | None:
    """Seconds of CPU time the whole machine has spent busy since boot (from /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its children that have been waited for."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + children_cpu_seconds()


class OtherLoad:
    """How busy the rest of the machine was while a child benchmark ran: CPU time of every other
    process, as a share of the machine's capacity (0 = quiet, 1 = every core busy elsewhere).
    `ours` says which CPU time is not "other" (here: the children this process waited for)."""

    share: float | None = None
    ours = staticmethod(children_cpu_seconds)

    def __enter__(self) -> OtherLoad:
        self.busy0, self.ours0, self.t0 = cpu_busy_seconds(), self.ours(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy1 = cpu_busy_seconds()
        if self.busy0 is None or busy1 is None:
            return
        wall = time.perf_counter() - self.t0
        other = (busy1 - self.busy0) - (self.ours() - self.ours0)
        self.share = round(max(0.0, other) / (wall * (os.cpu_count() or 1)), 3)


class Measuring(OtherLoad):
    """`with harness.measuring() as m:` around the timed part of a benchmark. Waits first for a
    quiet machine when BENCH_WAIT_QUIET=<seconds> is set (`run.py --wait-quiet`), then records in
    `m.share` the CPU time other processes used meanwhile (all but this process and its children),
    as a share of the machine's capacity: figures taken with a share above ~0.1 are not comparable
    with a quiet run."""

    ours = staticmethod(own_cpu_seconds)

    def __enter__(self) -> Measuring:
        wait = float(os.environ.get("BENCH_WAIT_QUIET") or 0)
        if wait > 0:
            wait_for_quiet(wait)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self.share is not None:
            progress(f"other processes used {self.share:.0%} of the machine's CPU while this was measured")


measuring = Measuring


def machine_busy_share(window: float = 5.0) -> float | None:
    """Share of the machine's CPU capacity in use over the next `window` seconds."""
    before = cpu_busy_seconds()
    time.sleep(window)
    after = cpu_busy_seconds()
    if before is None or after is None:
        return None
    return (after - before) / (window * (os.cpu_count() or 1))


def wait_for_quiet(max_wait: float, threshold: float = 0.15, window: float = 10.0) -> float | None:
    """Wait (at most `max_wait` seconds) until the machine's CPU use over `window` is below
    `threshold`; returns the last measured share."""
    deadline = time.monotonic() + max_wait
    while True:
        share = machine_busy_share(window)
        if share is None or share < threshold or time.monotonic() >= deadline:
            return share
        print(f"  .. waiting for a quiet machine: {share:.0%} of the CPU busy", flush=True)


# --- command line -------------------------------------------------------------------------------


def arguments(
    description: str, episodes: int, extra: Callable[[argparse.ArgumentParser], object] | None = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--episodes", type=int, default=episodes, help=f"data size (default {episodes:,})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary database and index folder")
    if extra:
        extra(parser)
    return parser.parse_args()

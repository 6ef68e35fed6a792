"""A single-node SLURM cluster for tests: munged, slurmctld and slurmd started as this process's own
children under a temporary directory, configured from the templates beside this file with the
machine's real CPUs and memory (`slurmd -C`), partitions `cpu` and `gpu` on the one node, and GPUs
declared as generic resources on placeholder devices. Clients (sbatch, squeue, scancel, and the
snakemake that calls them) find it through the environment in `Cluster.env` (SLURM_CONF).

`single_node_cluster` waits until `sinfo` shows the node idle and, however its block ends, cancels
what is still queued and stops the daemons; `missing()` says why a cluster cannot run here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent
# where SLURM programs built for Debian look for slurm.conf
NODE_CONF_DIR = "/etc/slurm"
PROGRAMS = ("unshare", "munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "srun")


def missing() -> str | None:
    """Why no cluster can be started on this machine, or None."""
    absent = [name for name in PROGRAMS if shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin") is None]
    if absent:
        return (f"SLURM is not installed ({', '.join(absent)} not found; on Debian: "
                "apt-get install slurmctld slurmd slurm-client munge)")
    if not Path(NODE_CONF_DIR).is_dir():
        return f"SLURM is not installed: {NODE_CONF_DIR} is missing"
    if os.geteuid() != 0:
        return "slurmd starts each job as its user, which only root may do: run the SLURM tests as root"
    try:
        subprocess.run(_in_node_namespace(TEMPLATES, ["true"]), check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"no mount namespace for the node's configuration here (unshare --mount, mount --bind): {e}"
    return None


@dataclass(frozen=True)
class Cluster:
    root: Path
    node: str
    gpu_model: str
    gpus: int
    env: dict
    daemons: tuple

    def run(self, *command: str, check: bool = True) -> str:
        """A SLURM client command against this cluster; its stdout."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr}\n{self.logs()}")
        return done.stdout

    def logs(self) -> str:
        """The daemons' logs, the end of each."""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.root.glob("*.log")))

    def jobs(self) -> list[dict]:
        """Every job slurmctld still holds (a finished one for MinJobAge seconds), as `squeue
        --json` describes it: job_id, job_state, partition, comment (the executor plugin's
        rule_<rule>_wildcards_<values>) and tres_per_job (the GPUs it asked for: gres:gpu:<model>:1)."""
        return json.loads(self.run("squeue", "--json", "--states=all"))["jobs"]

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        """Polls `condition` until it holds; fails, with the daemons' logs, when one has exited or
        the time is up."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            dead = [name for name, process in self.daemons if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"{', '.join(dead)} exited" if dead else f"not after {timeout_s} s"
                raise RuntimeError(f"waiting for {what}: {why}\n{self.logs()}")
            time.sleep(0.3)

    def node_state(self) -> list[str]:
        return self.run("sinfo", "--noheader", "--Node", "--format=%t", check=False).split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line(node: str) -> str:
    """`slurmd -C`'s NodeName line, named `node`: the CPUs, sockets and memory this machine has."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True, timeout=30).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("NodeName=")]
    fields = [f for f in line.split() if not f.startswith(("NodeName=", "UpTime="))]
    return " ".join([f"NodeName={node}", *fields])


def _write_config(root: Path, node: str, gpu_model: str, gpus: int) -> Path:
    for sub in ("etc", "munge", "state", "spool", "dev"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    for index in range(gpus):  # slurmd wants character devices: /dev/null's, under other names
        os.mknod(root / "dev" / f"gpu{index}", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    fields = {"root": root, "node": node, "node_line": _node_line(node), "gpu_model": gpu_model,
              "gpus": gpus, "last_gpu": gpus - 1, "ctld_port": _free_port(), "slurmd_port": _free_port()}
    for name in ("slurm.conf", "gres.conf"):
        (root / "etc" / name).write_text((TEMPLATES / f"{name}.in").read_text().format(**fields))
    return root / "etc" / "slurm.conf"


def _in_node_namespace(conf_dir: Path, command: list[str]) -> list[str]:
    """`command` in a mount namespace of its own where NODE_CONF_DIR, where the node's programs
    look for their configuration, is `conf_dir`. The jobs inherit it; so does the `srun` the
    executor plugin runs in each job, which has no other way to find the cluster (the plugin's job
    step drops SLURM_CONF from its environment, as a real node keeps its configuration there)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" "$1" && shift && exec "$@"', str(conf_dir), NODE_CONF_DIR, *command]


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 20 s, to the daemon's own process group only."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _start(stack: ExitStack, root: Path, name: str, command: list[str], env: dict) -> tuple:
    out = stack.enter_context(open(root / f"{name}.out", "w"))
    # a session of its own: stopping it signals it and what it forked, never the test's group
    process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(_stop, process)
    return name, process


def _cancel_all(cluster: Cluster, timeout_s: float = 60) -> None:
    """Every job of the cluster cancelled and gone, so that no job step outlives the daemons."""
    cluster.run("scancel", "--full", "--user", "root", check=False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and cluster.run(
            "squeue", "--noheader", "--format=%i", "--states=PD,R,CG,S", check=False).split():
        time.sleep(0.5)


@contextmanager
def single_node_cluster(root: Path, gpu_model: str = "testgpu", gpus: int = 2) -> Iterator[Cluster]:
    """munged, slurmctld and slurmd for one node named after this machine (`hostname -s`), in
    partitions cpu and gpu with `gpus` GPUs of type `gpu_model`; stopped when the block ends."""
    root = Path(root).resolve()
    node = socket.gethostname().split(".")[0]
    conf = _write_config(root, node, gpu_model, gpus)
    # a cluster of our own, also where the tests run inside a SLURM job or beside another cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SQUEUE_"))}
    env["SLURM_CONF"] = str(conf)
    key = root / "munge" / "munge.key"
    subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30)
    with ExitStack() as stack:
        munged = _start(stack, root, "munged", [
            "munged", "--foreground", "--force", f"--socket={root}/munge/munge.socket", f"--key-file={key}",
            f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/munged.log",
            f"--seed-file={root}/munge/munged.seed"], env)
        cluster = Cluster(root, node, gpu_model, gpus, env, (munged,))
        cluster.wait_for((root / "munge/munge.socket").exists, "munged's socket")
        daemons = (munged, _start(stack, root, "slurmctld", ["slurmctld", "-D", "-f", str(conf)], env),
                   _start(stack, root, "slurmd", _in_node_namespace(conf.parent, ["slurmd", "-D", "-N", node]), env))
        cluster = Cluster(root, node, gpu_model, gpus, env, daemons)
        stack.callback(_cancel_all, cluster)  # runs before the daemons stop
        cluster.wait_for(lambda: set(cluster.node_state()) == {"idle"}, "the node to be idle")
        yield cluster

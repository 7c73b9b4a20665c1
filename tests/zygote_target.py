"""A stand-in cell process for the launcher tests: `main([spec, out])` does what spec["action"]
says (the real cell is collector.child.cell; this one needs no torch)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv):
    spec = json.loads(Path(argv[0]).read_text())
    action = spec.get("action", "ok")
    print(f"target pid {os.getpid()} pgid {os.getpgid(0)} action {action}", flush=True)
    if action == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        Path(spec["pidfile"]).write_text(str(child.pid))
        time.sleep(300)
    elif action == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif action == "leak":  # writes into a compile cache that is not its own
        Path(spec["path"], "leaked.bin").parent.mkdir(parents=True, exist_ok=True)
        Path(spec["path"], "leaked.bin").write_bytes(b"x")
    elif action == "kill-parent":
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(300)
    Path(argv[1]).write_text(json.dumps({"status": "ok", "pid": os.getpid(), "ppid": os.getppid(),
                                         "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
                                         "modules": sorted(m for m in ("json", "torch") if m in sys.modules)}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])

"""What the multi-process cluster tests (fault, soak) share: starting a satrap process the way
`satrap up` does, and waiting for a condition."""
import subprocess
import time


def start_recorded(argv, cwd, log_path, pid_path):
    """Starts `argv` as `satrap up` starts a cluster process: output appended to `log_path`, a
    session of its own, and the record `satrap down` checks (cli/process_record.hpp): pid, start
    time, argv."""
    with open(log_path, "a") as log:
        p = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    with open(f"/proc/{p.pid}/stat") as f:
        start_time = f.read().rsplit(")", 1)[1].split()[19]
    with open(pid_path, "w") as f:
        f.write(f"{p.pid}\n{start_time}\n{(chr(0).join(argv) + chr(0)).encode().hex()}\n")
    return p


def wait_for(pred, what, timeout, fail):
    """pred()'s first true value within `timeout` seconds; else fail("timed out waiting for ...")."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")

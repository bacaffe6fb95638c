"""Run test code in a fresh interpreter with several host devices.

XLA reads ``--xla_force_host_platform_device_count`` once, at start-up, so
multi-device checks run in a subprocess and the rest of the suite keeps one
device.
"""

import os
import subprocess
import sys
import textwrap


def run_with_host_devices(code: str, devices: int = 8, timeout: float = 600) -> str:
    """Run ``code`` with ``devices`` CPU devices; return its stdout, raise on failure."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    # These programs check partitioning against the unsharded values computed beside them, in
    # the same interpreter; XLA's optimisation passes cost a third of their CPU time and
    # change neither (README: how the suite compiles).
    env.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"subprocess with {devices} devices exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc.stdout

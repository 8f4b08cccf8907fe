"""Plants a daemon: at import, a double fork with setsid leaves a process outside the worker's
process group, which would live on (as nobody) to tamper with later workers' folders."""

import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open("daemon.pid", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
time.sleep(0.5)  # let the daemon write its pid before the kernel is evaluated

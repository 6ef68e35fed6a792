"""The child process of one isolated run or timing:

    python -m rr.run.child BACKEND LAUNCH_DIR OUT_DIR [MMA_MODEL]
    python -m rr.run.child time REFERENCE OTHER OUT.json NOISE_TARGET TIME_LIMIT_S BACKEND
"""

import sys

from rr.run.isolate import child_main, child_time

if __name__ == "__main__":
    if sys.argv[1] == "time":
        sys.exit(child_time(*sys.argv[2:8]))
    sys.exit(child_main(*sys.argv[1:5]))

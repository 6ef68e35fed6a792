"""The child process of one isolated run or timing:

    python -m rr.run.child BACKEND LAUNCH_DIR OUT_DIR [MMA_MODEL [REFERENCE]]   (empty: none)
    python -m rr.run.child time REFERENCE OTHER OUT.json NOISE_TARGET TIME_LIMIT_S BACKEND
"""

import sys

from rr.run.isolate import child_dispatch

if __name__ == "__main__":
    sys.exit(child_dispatch(sys.argv[1:]))

"""Join the job whose coordinator is at the first argument, as process 1 of 2."""
import sys

import ember.distributed

ember.distributed.initialize(coordinator_address=sys.argv[1], num_processes=2, process_id=1)

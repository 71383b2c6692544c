"""``python -m ember.bench``: the same as ``ember bench``."""
import sys

from ember.bench.command import main

sys.exit(main())

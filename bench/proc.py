"""A process's footprint as Linux reports it (resident memory, CPU seconds) and waiting for its start-up work to end,
for the benchmarks that run `hivenote serve` or the tray as a separate process. The code is tests/support/proc.py:
the load test (tests/reliability/test_load.py) measures with it too."""

from tests.support.proc import cpu_s as cpu_s
from tests.support.proc import rss_mb as rss_mb
from tests.support.proc import settle as settle

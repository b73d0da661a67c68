"""``python -m dali_pipes.selfcheck [--quick] [--out DIR]``."""

from dali_pipes.selfcheck.run import main

main()

"""``python -m dali_pipes.train``: train a model (:mod:`dali_pipes.train.run`)."""

from dali_pipes.train.run import main

main()

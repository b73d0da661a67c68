"""The one command-line wrapper every tool uses (train, bench, doctor).

Hydra composes ``conf/<config_name>.yaml`` with the command-line overrides and calls the
tool's plain ``task(cfg)`` function (the one tests call directly). A
:class:`~dali_pipes.errors.DaliPipesError` becomes one line on stderr and exit code 2;
anything else is a bug and keeps Hydra's traceback.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable

import hydra
from omegaconf import DictConfig

from dali_pipes.config import check_augment, config_dir, register_configs
from dali_pipes.errors import DaliPipesError
from dali_pipes.preemption import Preempted


def run(task: Callable[[DictConfig], object], config_name: str) -> None:
    # Ctrl-C / SIGINT must reach the task (train saves a checkpoint at the batch it was in),
    # even when this process was started with SIGINT ignored -- as a non-interactive shell
    # starts background jobs, and as any child of a process that ignores it at that moment
    # starts; Python keeps an inherited SIG_IGN instead of installing its handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    register_configs()
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")

    @hydra.main(config_path=str(config_dir()), config_name=config_name, version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        try:
            check_augment(cfg)
            task(cfg)
        except DaliPipesError as exc:
            print(f"dali_pipes: error: {exc}", file=sys.stderr)
            sys.exit(2)
        except Preempted as exc:  # stopped at a step boundary, checkpoint written
            print(f"dali_pipes: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:  # a second Ctrl-C, or one outside training
            print("dali_pipes: interrupted", file=sys.stderr)
            sys.exit(130)

    _main()

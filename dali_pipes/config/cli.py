"""The one command-line wrapper every tool uses (train, bench, doctor, scan, pack).

Hydra composes ``conf/<config_name>.yaml`` with the command-line overrides and calls the
tool's plain ``task(cfg)`` function (the one tests call directly). A
:class:`~dali_pipes.errors.DaliPipesError` becomes one line on stderr and exit code 2, and
so does a mistake Hydra itself finds while composing (an unknown option such as
``model=nonexistent``, with the available ones; a misspelt key; an override that does not
parse); anything else is a bug and keeps Hydra's traceback.

With ``-m`` (multirun) every job gets its own ``output_dir``: the job's directory Hydra
makes, ``hydra.sweep.dir/hydra.sweep.subdir`` (``conf/train.yaml``: ``<output_dir>/<job
number>``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from dali_pipes.config.compose import config_dir
from dali_pipes.config.schemas import register
from dali_pipes.config.specs import check_augment, config_error
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.preemption import Interrupted, Preempted

# Hydra prints its own errors (several lines, exit code 1) unless this is "1"; then it
# raises them.
FULL_ERROR = "HYDRA_FULL_ERROR"


def run(task: Callable[[DictConfig], object], config_name: str) -> None:
    # Ctrl-C / SIGINT must reach the task (train saves a checkpoint at the batch it was in),
    # even when this process was started with SIGINT ignored -- as a non-interactive shell
    # starts background jobs, and as any child of a process that ignores it at that moment
    # starts; Python keeps an inherited SIG_IGN instead of installing its handler.
    """Run tool ``task`` on ``conf/<config_name>.yaml`` composed with the command line:
    a :class:`~dali_pipes.errors.DaliPipesError` or a mistake Hydra finds is one line on
    stderr and exit code 2, a preemption and a second signal exit 128 + signal, a Ctrl-C
    outside training 130."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    register()
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
    # Our INFO lines are for the user; a library's (matplotlib's font cache, made on first
    # use; boto3 saying where it found credentials, for every client) are not.
    for library in ("matplotlib", "boto3", "botocore", "s3transfer", "urllib3"):
        logging.getLogger(library).setLevel(logging.WARNING)
    # While Hydra composes, it raises its errors so that they are reported here in one
    # line; while the task runs, the user's setting is back and Hydra reports a bug's
    # traceback as it always does. HYDRA_FULL_ERROR=1 from the user keeps Hydra's reports.
    user_setting = os.environ.get(FULL_ERROR)
    one_line = user_setting != "1"

    def hydra_raises(on: bool) -> None:
        if on and one_line:
            os.environ[FULL_ERROR] = "1"
        elif user_setting is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = user_setting

    @hydra.main(config_path=str(config_dir()), config_name=config_name, version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        hydra_raises(False)
        try:
            check_augment(cfg)
            _job_output_dir(cfg)
            task(cfg)
        except DaliPipesError as exc:
            _fail(exc)
        except Preempted as exc:  # stopped at a step boundary, checkpoint written
            print(f"dali_pipes: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:  # a second signal, or a Ctrl-C outside training
            print("dali_pipes: interrupted", file=sys.stderr)
            sys.exit(exc.exit_code if isinstance(exc, Interrupted) else 130)
        hydra_raises(True)  # the next job of a multirun is composed next

    hydra_raises(True)
    try:
        _main()
    except Exception as exc:
        error = config_error(exc) if one_line else None
        if error is None:
            raise
        _fail(error)
    finally:
        hydra_raises(False)


def _fail(exc: DaliPipesError) -> None:
    print(f"dali_pipes: error: {exc}", file=sys.stderr)
    _to_log_files(f"error: {exc}")
    sys.exit(2)


def _to_log_files(message: str) -> None:
    """Also write ``message`` to the run's log files (train.log), which the console line
    printed above does not reach, so the log of a failed run ends with why it failed."""
    record = logging.LogRecord("dali_pipes", logging.ERROR, __file__, 0, message, None, None)
    for handler in logging.getLogger("dali_pipes").handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def _job_output_dir(cfg: DictConfig) -> None:
    """In a multirun, point ``output_dir`` at the directory Hydra made for this job."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN and "output_dir" in cfg:
        cfg.output_dir = hydra_cfg.runtime.output_dir

"""What a DALI error says about its cause: memory, the GPU, the data, or something else.

A DALI error from the decoder or another operator that reads the images may be a bad
file's; CUDA out-of-memory and other GPU errors never are, and must not start a search for
one (:func:`failure_kind`). :func:`reason` is the informative part of DALI's message, in one
line, with nvImageCodec's status named.
"""

from __future__ import annotations

import re
from typing import Literal

import torch

from dali_pipes.errors import DaliPipesError

Failure = Literal["memory", "device", "data", "other"]

# nvImageCodec status codes (nvimgcodec.h) as DALI reports them: "nvImageCodec failure: '#4'".
_CODEC_STATUS = {
    1: "not initialized",
    2: "invalid parameter",
    3: "bad code stream",
    4: "code stream unsupported",
    5: "allocator failure",
    6: "execution failed",
    7: "architecture mismatch",
    8: "internal error",
    9: "implementation unsupported",
    10: "missed dependencies",
    11: "extension not initialized",
    12: "invalid parameter",
    13: "bad code stream",
    14: "code stream unsupported",
    15: "allocator failure",
    16: "architecture mismatch",
    17: "internal error",
    18: "implementation unsupported",
    19: "incomplete bitstream",
    20: "execution failed",
    21: "CUDA call error",
}
_CODEC_CODE = re.compile(r"nvImageCodec failure: '#(\d+)'")
_CODEC_MEMORY = {5, 15}  # the decoder's allocator failed: memory, not the file
_CODEC_DEVICE = {1, 7, 10, 11, 16, 21}  # the GPU, the driver or the install, not the file
# Memory exhaustion as torch, the CUDA runtime/driver and DALI word it. DALI's own CUDA
# allocations fail with "Can't allocate N bytes on device D." (or "... on host.").
_MEMORY = re.compile(
    r"out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
    r"|can't allocate \d+ bytes|CUDA allocation failed",
    re.IGNORECASE,
)
# Any other CUDA/GPU failure: torch's "CUDA error: ...", DALI's "CUDA runtime API error
# cudaError... (N):", the driver's CUDA_ERROR_*, NCCL, cuBLAS/cuDNN, faulting kernels.
_DEVICE = re.compile(
    r"\bCUDA (?:error|runtime API error|driver API error)|\bcudaError[A-Za-z]+|\bCUDA_ERROR_[A-Z_]+"
    r"|illegal (?:memory access|instruction|address)|misaligned address|\bECC error"
    r"|unspecified launch failure|device-side assert|\bNCCL\b|CUBLAS_STATUS_|CUDNN_STATUS_"
    r"|no CUDA-capable device|CUDA driver version is insufficient",
    re.IGNORECASE,
)
# DALI's wording for an error raised by an operator while it ran on a batch (its decoders
# among them): "Error in CPU operator `nvidia.dali.fn.decoders.image`, ... encountered:".
_DALI_OPERATOR = re.compile(r"Error (?:in|when executing) (?:CPU|MIXED|GPU) operator")


def failure_kind(exc: BaseException) -> Failure:
    """What an exception raised while producing a batch says about its cause.

    ``memory``: the GPU (or host) ran out of memory. ``device``: another CUDA/GPU or driver
    failure. ``data``: a DALI operator failed on the batch's content -- a file may be to
    blame, and only this kind starts the search for it. ``other``: anything else (our
    own one-line errors, bugs). Memory and device are checked first because DALI reports
    an allocation failure inside its decoder in the same "Error in MIXED operator" frame
    as a corrupt file; a bad file must never be named for a GPU that is full or broken.
    """
    if isinstance(exc, DaliPipesError):
        return "other"
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return "memory"
    text = str(exc)
    codes = {int(c) for c in _CODEC_CODE.findall(text)}
    if _MEMORY.search(text) or codes & _CODEC_MEMORY:
        return "memory"
    if _DEVICE.search(text) or codes & _CODEC_DEVICE:
        return "device"
    if _DALI_OPERATOR.search(text) or "Failed to decode sample" in text or codes:
        return "data"
    return "other"


# DALI's wrapping of an operator's message, and the pipeline definition's traceback.
_BOILERPLATE = re.compile(
    r"Critical error|Current pipeline object|Error (?:in|when executing) (?:CPU|MIXED|GPU) "
    r"operator|which was used in the pipeline definition|File \"|C\+\+ context"
)


def reason(exc: BaseException) -> str:
    """The informative part of a DALI error, on one line.

    DALI wraps the operator's message in boilerplate ("Critical error in pipeline", the
    pipeline definition's traceback, "Current pipeline object is no longer valid"); the
    message proper follows "encountered:". nvImageCodec's numeric status gets its name.
    """
    text = str(exc).strip()
    if "encountered:" in text:
        text = text.rsplit("encountered:", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _BOILERPLATE.match(ln)]
    reason = " ".join(useful or lines[-1:]).rstrip(" :") or type(exc).__name__
    code = _CODEC_CODE.search(reason)
    if code and int(code.group(1)) in _CODEC_STATUS:
        reason += f" ({_CODEC_STATUS[int(code.group(1))]})"
    return reason


def sample_paths(paths: list[str], shown: int = 4) -> str:
    """A few paths for a one-line message, with how many more there are."""
    more = f" (+{len(paths) - shown} more)" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more

"""Refusals about a run directory, in the caller's terms.

``train(..., run_dir=...)`` and ``Trainer`` say what to do in Python
(``resume=True``, ``overwrite=True``, another ``run_dir``); ``gpu-vecenv train`` turns the
same error into its flags (``--resume RUN_DIR``, ``--overwrite``, ``--run-dir``) with
:meth:`RunDirectoryInUse.for_command_line` / :meth:`NoCheckpointYet.for_command_line`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Terms:
    """How a caller names the ways out: resuming, overwriting, another directory."""

    resume: str
    overwrite: str
    run_dir: str


PYTHON = Terms("resume=True", "overwrite=True", "run_dir")
COMMAND_LINE = Terms("--resume {run_dir}", "--overwrite", "--run-dir")


class RunDirectoryInUse(ValueError):
    """A new run asked for a directory that already holds a run (``resumable``: one with a
    checkpoint; otherwise it stopped before its first)."""

    def __init__(self, run_dir: Path, resumable: bool, terms: Terms = PYTHON):
        self.run_dir, self.resumable = run_dir, resumable
        resume = terms.resume.format(run_dir=run_dir)
        if resumable:
            text = (f"run directory {run_dir} already holds a run; continue it with {resume}, "
                    f"start afresh in it with {terms.overwrite} (deletes its checkpoints and "
                    f"logs), or choose another {terms.run_dir}")
        else:
            text = (f"run directory {run_dir} holds a run that stopped before its first "
                    f"checkpoint, so it cannot be resumed; start afresh in it with "
                    f"{terms.overwrite}, or choose another {terms.run_dir}")
        super().__init__(text)

    def for_command_line(self) -> RunDirectoryInUse:
        """The same refusal in ``gpu-vecenv train``'s flags."""
        return RunDirectoryInUse(self.run_dir, self.resumable, COMMAND_LINE)


class NoCheckpointYet(FileNotFoundError):
    """A resume asked for a run that stopped before writing its first checkpoint."""

    def __init__(self, missing: str, terms: Terms = PYTHON):
        self.missing = missing
        super().__init__(f"{missing}: the run stopped before its first checkpoint; start it "
                         f"afresh with {terms.overwrite}")

    def for_command_line(self) -> NoCheckpointYet:
        """The same refusal in ``gpu-vecenv train``'s flags."""
        return NoCheckpointYet(self.missing, COMMAND_LINE)

"""Where the original harness keeps the attachment bytes of its logs (`<DSH_HOME>/attachments/v1`)."""

from __future__ import annotations

import os
from pathlib import Path

ORIGINAL_SUBDIR = Path("attachments") / "v1"  # below the original's DSH_HOME


def original_attachment_root(log_path: Path) -> Path:
    """Where the original harness keeps the attachments of the log at `log_path`.

    The nearest ancestor directory holding `attachments/v1` (a log below `DSH_HOME`), else
    `$DSH_HOME/attachments/v1` when that exists, else `attachments/v1` beside the log (where a
    new original-format log outside any DSH_HOME keeps its own).
    """
    for directory in log_path.absolute().parents:
        if (directory / ORIGINAL_SUBDIR).is_dir():
            return directory / ORIGINAL_SUBDIR
    home = os.environ.get("DSH_HOME")
    if home and (Path(home) / ORIGINAL_SUBDIR).is_dir():
        return Path(home) / ORIGINAL_SUBDIR
    return log_path.absolute().parent / ORIGINAL_SUBDIR

"""Old home of ``sophon-dsl run`` / ``dry-run``: now :mod:`sophon_dsl.cli.run`,
:mod:`sophon_dsl.cli.dry_run` and :mod:`sophon_dsl.cli.progress`; kept so imports still work."""

from .cli.common import parse_json_arg, provider_problem, read_flag_file
from .cli.progress import ProgressView

__all__ = ["ProgressView", "parse_json_arg", "provider_problem", "read_flag_file"]

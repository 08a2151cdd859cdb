"""The shells click has no completion for: elvish and PowerShell.

`WordListComplete` adds both on click's completion protocol: the script runs
kernelnix with `_KERNELNIX_COMPLETE=<shell>_complete` and the words typed so
far, one per line, in `_KERNELNIX_COMPLETE_WORDS` (the last one is the word
being completed), and reads back `type,value` lines (`plain`, or `file`/`dir`
for a path). kernelnix.cli imports this module when a shell asks it to
complete; the `completion` command prints the scripts.
"""

from __future__ import annotations

import os
from typing import Any

from click.shell_completion import CompletionItem, ShellComplete, add_completion_class

# `use str` before the completer: elvish resolves `str:` when the closure is compiled.
ELVISH_SOURCE = """\
use str
set edit:completion:arg-completer[%(prog_name)s] = {|@words|
    tmp E:%(complete_var)s = elvish_complete
    tmp E:%(words_var)s = (str:join "\\n" $words)
    %(prog_name)s | from-lines | each {|line|
        var kind value = (str:split &max=2 , $line)
        if (eq $kind plain) { put $value } else { edit:complete-filename $value }
    }
}
"""

# A completer that outputs nothing leaves the word to PowerShell's path completion.
POWERSHELL_SOURCE = """\
Register-ArgumentCompleter -Native -CommandName %(prog_name)s -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @($commandAst.CommandElements |
        Where-Object { $_.Extent.StartOffset -lt $cursorPosition } |
        ForEach-Object { $_.ToString() })
    if ($wordToComplete -eq '') { $words += '' }
    $env:%(complete_var)s = 'powershell_complete'
    $env:%(words_var)s = $words -join "`n"
    try { $lines = @(& %(prog_name)s) }
    finally { Remove-Item Env:%(complete_var)s, Env:%(words_var)s }
    foreach ($line in $lines) {
        $kind, $value = $line -split ',', 2
        if ($kind -eq 'plain') {
            [System.Management.Automation.CompletionResult]::new(
                $value, $value, 'ParameterValue', $value)
        }
    }
}
"""


class WordListComplete(ShellComplete):
    """A shell whose script passes the typed words, one per line, in `<VAR>_WORDS`."""

    @property
    def words_var(self) -> str:
        return f"{self.complete_var}_WORDS"

    def source_vars(self) -> Any:
        return {**super().source_vars(), "words_var": self.words_var}

    def get_completion_args(self) -> tuple[list[str], str]:
        words = os.environ.get(self.words_var, "").split("\n")
        return words[1:-1], words[-1] if len(words) > 1 else ""

    def format_completion(self, item: CompletionItem) -> str:
        return f"{item.type},{item.value}"


class ElvishComplete(WordListComplete):
    name = "elvish"
    source_template = ELVISH_SOURCE


class PowerShellComplete(WordListComplete):
    name = "powershell"
    source_template = POWERSHELL_SOURCE


# Known to click's `<shell>_complete` instructions once this module is imported
# (kernelnix.cli imports it when the completion variable is set, and so does the
# completion command).
add_completion_class(ElvishComplete)
add_completion_class(PowerShellComplete)

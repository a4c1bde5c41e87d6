"""The error every run raises when it cannot go on as asked."""


class RunError(ValueError):
    """A run (pre-training, fine-tuning, SQuAD) cannot start or continue as asked.

    The message names the flag, file or directory at fault and what to do;
    the command lines print it as a usage error.
    """

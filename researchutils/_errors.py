"""Context for a user's exception, shared by every module (standard library only)."""


def add_note(error: BaseException, note: str) -> None:
    """Adds ``note`` to ``error``; its type and message stay as they are.

    Python 3.11 and newer print notes below the message; older Pythons keep the
    exception unchanged.

    Args:
        error (BaseException): The exception to annotate.
        note (str): What was being done, e.g. which index or file.
    """
    if hasattr(error, 'add_note'):
        error.add_note(note)

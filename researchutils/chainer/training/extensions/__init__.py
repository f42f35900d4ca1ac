"""researchutils.chainer.training.extensions: trainer extensions.

Importing this package loads no optional dependency; slack_sdk is imported
only when a :class:`SlackReport` is made from a token.
"""
from researchutils.chainer.training.extensions.slack_report import SlackReport  # NOQA

__all__ = ['SlackReport']

"""The ladder's numeric flags: a number that must lie in a range, refused by argparse with the range in
the message (what CLI::Range does for the C++ programs), its default shown in --help."""

import argparse


def in_range(kind, low, high):
    """An argparse `type` that parses `kind` (int or float) and accepts low <= value <= high."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {high}]")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def add_number(parser, flag, kind, low, high, default, help, **kwargs):
    """The flag `flag`: a `kind` in [low, high], `default` when absent (shown in --help after `help`)."""
    parser.add_argument(flag, type=in_range(kind, low, high), default=default, help=f"{help} (%(default)s)", **kwargs)

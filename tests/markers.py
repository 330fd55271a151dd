"""Source lines a test names by a marker comment (`# <name>` at the end of a line), so that a
report's expected line survives edits above it."""


def marked_lines(path: str) -> dict:
    """marker -> line number in the file at `path`, for its `# <marker>` comments."""
    found = {}
    with open(path) as source:
        for number, line in enumerate(source, 1):
            if "# <" in line:
                found[line.split("# <", 1)[1].split(">", 1)[0]] = number
    return found

"""Fresh names for IR locals, shared by the frontend and the autodiff transforms."""


class Namer:
    """Unique IR names: the user's name when free, then name_1, name_2, ..."""

    def __init__(self):
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        base = base or "t"
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

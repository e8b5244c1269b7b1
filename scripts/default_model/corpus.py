#!/usr/bin/env python3
"""The default model's training corpus: seeded, rebuilt from packages with open licences.

    python3 scripts/default_model/corpus.py --chitchat DATASET_JSON --out DIR

Three sources, mixed into documents (one JSON string each, in DIR/train.jsonl and DIR/heldout.jsonl):

- simple stories and short ChatML dialogues from this script's own seeded grammar; the words
  are hand-picked lists, each checked against WordNet (Debian package `wordnet-base`, WordNet 3.0
  licence) so that a typo fails the build, and the definitions and example sentences the
  dialogues quote are WordNet's own glosses;
- WordNet's example sentences (the quoted parts of its glosses), a few to a document;
- the conversations of `chitchat-dataset` (PyPI, MIT licence; BYU PCC lab), as ChatML
  dialogues between a user and the assistant.

Every assistant turn is written as the chat template renders it: an empty think block, then the
answer. The held-out split takes every document whose seeded draw falls under HELDOUT_SHARE.
"""

import argparse
import json
import random
import re
from pathlib import Path

SEED = 20261205
HELDOUT_SHARE = 0.01
WORDNET = Path("/usr/share/wordnet")

ANIMALS = """cat dog rabbit mouse bird duck fox bear owl frog horse cow pig sheep goat lion tiger
elephant monkey squirrel turtle fish hen puppy kitten deer wolf bee butterfly snail hedgehog
penguin dolphin whale giraffe zebra donkey goose parrot crow spider ant""".split()
NAMES_HE = "Tom Max Ben Sam Leo Jack Tim Finn Oscar Milo Jake Noah Pip Toby Ollie".split()
NAMES_SHE = "Lily Mia Lucy Anna Sue Ella Rosie Daisy Molly Zoe Emma Kate Ruby Nora Amy".split()
CHILDREN = "boy girl".split()
ADJECTIVES = """little big small happy kind brave shy clever curious friendly gentle quiet
young old funny sleepy busy proud lazy playful""".split()
OBJECTS = """ball kite hat box book key toy boat drum apple cake cookie flower shell stone
feather ribbon blanket bell basket cup spoon sock balloon crayon""".split()
COLOURS = "red blue green yellow orange purple pink white black brown".split()
PLACES = """forest garden park farm village town river pond meadow beach hill house barn
field lake school""".split()
# What a character eats, as the sentence needs it (plural or mass), keyed by the WordNet lemma.
FOODS = {"apple": "apples", "carrot": "carrots", "cake": "cake", "bread": "bread",
         "cheese": "cheese", "honey": "honey", "soup": "soup", "banana": "bananas",
         "cookie": "cookies", "pie": "pie", "berry": "berries", "nut": "nuts"}
EMOTIONS = "sad worried scared lonely upset tired".split()
GOOD_EMOTIONS = "happy glad proud excited thankful".split()
WEATHER = "sunny rainy windy snowy cold warm cloudy".split()

VOWEL = re.compile(r"^[aeiou]")


def a(word: str) -> str:
    return ("an " if VOWEL.match(word) else "a ") + word


class Rng(random.Random):
    def pick(self, items):
        return items[self.randrange(len(items))]


def wordnet_lemmas(pos: str) -> set[str]:
    lemmas = set()
    for line in (WORDNET / f"index.{pos}").read_text(encoding="latin-1").splitlines():
        if not line.startswith(" "):
            lemmas.add(line.split(" ", 1)[0])
    return lemmas


def check_vocabulary() -> None:
    nouns, adjs = wordnet_lemmas("noun"), wordnet_lemmas("adj")
    for word in ANIMALS + OBJECTS + PLACES + list(FOODS) + CHILDREN:
        if word not in nouns:
            raise SystemExit(f"{word!r} is not a WordNet noun")
    for word in ADJECTIVES + COLOURS + EMOTIONS + GOOD_EMOTIONS + WEATHER:
        if word not in adjs:
            raise SystemExit(f"{word!r} is not a WordNet adjective")


def wordnet_glosses() -> tuple[dict[str, str], list[str]]:
    """First-sense definitions of single-word nouns, and every quoted example sentence."""
    definitions: dict[str, str] = {}
    examples: list[str] = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (WORDNET / f"data.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" ") or "|" not in line:
                continue
            head, gloss = line.split("|", 1)
            fields = head.split()
            word = fields[4]
            parts = [p.strip() for p in gloss.split(";")]
            definition = parts[0]
            for part in parts[1:]:
                if part.startswith('"') and part.count('"') == 2 and len(part) > 12:
                    examples.append(part.strip('"'))
            if pos == "noun" and word.isalpha() and word.islower() and word not in definitions:
                if '"' not in definition and len(definition) > 10:
                    definitions[word] = definition
    return definitions, examples


class Character:
    def __init__(self, rng: Rng, kind: str | None = None):
        self.kind = kind or rng.pick(ANIMALS + CHILDREN)
        she = self.kind == "girl" or (self.kind != "boy" and rng.random() < 0.5)
        self.name = rng.pick(NAMES_SHE if she else NAMES_HE)
        self.he, self.him, self.his = ("she", "her", "her") if she else ("he", "him", "his")
        self.adj = rng.pick(ADJECTIVES)

    def He(self) -> str:
        return self.he.capitalize()


def story(rng: Rng, kind: str | None = None) -> str:
    c = Character(rng, kind)
    f = Character(rng)
    while f.name == c.name:
        f = Character(rng)
    place, obj, colour = rng.pick(PLACES), rng.pick(OBJECTS), rng.pick(COLOURS)
    food = FOODS[rng.pick(sorted(FOODS))]
    s: list[str] = []
    s.append(
        rng.pick(
            [
                f"Once upon a time, there was {a(c.adj)} {c.kind} named {c.name}.",
                f"Once upon a time, in {a(place)}, there lived {a(c.adj)} {c.kind} called {c.name}.",
                f"There was once {a(c.adj)} {c.kind} named {c.name} who lived near {a(place)}.",
                f"{c.name} was {a(c.adj)} {c.kind}.",
                f"One {rng.pick(WEATHER)} day, {a(c.adj)} {c.kind} named {c.name} went to the {place}.",
                f"In a small {place}, there lived {a(c.kind)} named {c.name}.",
            ]
        )
    )
    s.append(
        rng.pick(
            [
                f"{c.He()} loved to play with {c.his} {colour} {obj}.",
                f"{c.He()} liked to eat {food} every morning.",
                f"Every day, {c.he} walked to the {rng.pick(PLACES)} to see {c.his} friends.",
                f"{c.He()} had {a(colour)} {obj} that {c.he} loved very much.",
                f"{c.He()} was always {rng.pick(['happy', 'busy', 'curious'])} and liked to help others.",
            ]
        )
    )
    problem = rng.randrange(4)
    if problem == 0:
        s.append(f"One day, {c.he} could not find {c.his} {obj}.")
        s.append(f"{c.He()} looked under the bed and behind the door, but it was not there.")
        s.append(f"{c.name} felt {rng.pick(EMOTIONS)}.")
    elif problem == 1:
        s.append(f"One day, {c.he} wanted to climb a tall tree, but {c.he} was too small.")
        s.append(f"{c.He()} tried again and again, and {c.he} fell down.")
        s.append(f"{c.name} felt {rng.pick(EMOTIONS)}.")
    elif problem == 2:
        s.append(f"One morning, {c.he} saw {a(colour)} {obj} near the {rng.pick(PLACES)}.")
        s.append(f"\"What is that?\" {c.he} asked.")
        s.append(f"{c.name} was very curious, so {c.he} went closer to look.")
    else:
        s.append(f"One day, it started to rain, and {c.name} was far from home.")
        s.append(f"{c.He()} was cold and {rng.pick(EMOTIONS)}.")
    s.append(
        rng.pick(
            [
                f"Then {c.he} met {a(f.kind)} named {f.name}.",
                f"Just then, {c.his} friend {f.name} the {f.kind} came by.",
                f"Soon, {a(f.adj)} {f.kind} named {f.name} walked up to {c.him}.",
            ]
        )
    )
    s.append(
        rng.pick(
            [
                f"\"Do not be {rng.pick(EMOTIONS)}, {c.name}. I will help you,\" said {f.name}.",
                f"\"Can I help you?\" asked {f.name}.",
                f"{f.name} smiled and said, \"Let us do it together.\"",
                f"\"Hello, {c.name}! Why are you here?\" asked {f.name}.",
            ]
        )
    )
    if problem == 0:
        s.append(f"They looked everywhere, and at last they found the {obj} near the {rng.pick(PLACES)}.")
    elif problem == 1:
        s.append(f"{f.name} showed {c.name} how to hold on to the branches, and soon {c.he} reached the top.")
    elif problem == 2:
        s.append(f"Together, they picked up the {obj} and took it home.")
    else:
        s.append(f"{f.name} shared {f.his} umbrella, and they walked home together.")
    s.append(
        rng.pick(
            [
                f"{c.name} was {rng.pick(GOOD_EMOTIONS)}. \"Thank you, {f.name}!\" {c.he} said.",
                f"{c.name} smiled. {c.He()} felt {rng.pick(GOOD_EMOTIONS)} again.",
                f"After that, {c.name} and {f.name} ate {food} and played until the sun went down.",
            ]
        )
    )
    s.append(
        rng.pick(
            [
                f"From that day on, {c.name} and {f.name} were best friends.",
                f"{c.name} learned that friends help each other.",
                f"{c.name} learned that it is good to ask for help.",
                "The end.",
                f"That night, {c.name} went to sleep with a big smile.",
            ]
        )
    )
    return " ".join(s)


def chatml(turns: list[tuple[str, str]]) -> str:
    out = []
    for role, text in turns:
        body = f"<think>\n\n</think>\n\n{text}" if role == "assistant" else text
        out.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    return "".join(out)


def maybe_system(rng: Rng) -> list[tuple[str, str]]:
    return [("system", "You are a helpful assistant.")] if rng.random() < 0.3 else []


def generated_dialogue(rng: Rng, definitions: dict[str, str], examples: list[str]) -> str:
    turns = maybe_system(rng)
    kind = rng.randrange(5)
    if kind <= 1:
        animal = rng.pick(ANIMALS + CHILDREN)
        ask = rng.pick(
            [
                f"Tell me a story about {a(animal)}.",
                f"Can you tell me a story about {a(animal)}?",
                f"Please write a short story about {a(animal)}.",
                f"Tell me a story about {a(animal)}",
                f"I want a story about {a(animal)}.",
            ]
        )
        turns += [("user", ask), ("assistant", story(rng, animal))]
    elif kind == 2:
        word = rng.pick(sorted(set(ANIMALS + OBJECTS + PLACES + list(FOODS)) & definitions.keys()))
        ask = rng.pick([f"What is {a(word)}?", f"What does the word {word} mean?", f"Define {word}."])
        gloss = definitions[word]
        turns += [("user", ask), ("assistant", f"{a(word).capitalize()} is {a(gloss) if not gloss.startswith(('a ', 'an ', 'the ')) else gloss}.")]
    elif kind == 3:
        hello = rng.pick(["Hello!", "Hi!", "Hi there.", "Good morning!", "Hey, how are you?"])
        reply = rng.pick(
            [
                "Hello! How can I help you today?",
                "Hi! I am doing well, thank you. What would you like to talk about?",
                "Hello! Would you like me to tell you a story?",
            ]
        )
        turns += [("user", hello), ("assistant", reply)]
        if rng.random() < 0.5:
            animal = rng.pick(ANIMALS)
            turns += [("user", f"Yes, tell me a story about {a(animal)}."), ("assistant", story(rng, animal))]
    else:
        example = rng.pick(examples)
        turns += [
            ("user", "Can you give me an example sentence?"),
            ("assistant", f"Sure: \"{example[0].upper() + example[1:]}.\""),
        ]
    return chatml(turns)


def chitchat_dialogues(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    docs = []
    for key in sorted(data):
        turns = []
        for i, turn in enumerate(data[key]["messages"]):
            text = " ".join(m["text"].strip() for m in turn if m["text"].strip())
            if text:
                turns.append(("user" if i % 2 == 0 else "assistant", text))
        # Cut long conversations so each stays well inside a training window.
        for start in range(0, len(turns), 12):
            piece = turns[start : start + 12]
            if len(piece) >= 2 and piece[0][0] == "user":
                docs.append(chatml(piece))
    return docs


def build(chitchat: Path) -> tuple[list[str], list[str]]:
    check_vocabulary()
    rng = Rng(SEED)
    definitions, examples = wordnet_glosses()
    docs = [story(rng) for _ in range(150_000)]
    docs += [generated_dialogue(rng, definitions, examples) for _ in range(60_000)]
    docs += chitchat_dialogues(chitchat)
    shuffled = examples[:]
    rng.shuffle(shuffled)
    for start in range(0, len(shuffled), 8):
        docs.append(". ".join(e[0].upper() + e[1:] for e in shuffled[start : start + 8]) + ".")
    train, heldout = [], []
    for doc in docs:
        (heldout if rng.random() < HELDOUT_SHARE else train).append(doc)
    rng.shuffle(train)
    return train, heldout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chitchat", type=Path, required=True, help="chitchat_dataset/dataset.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    train, heldout = build(args.chitchat)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, docs in (("train", train), ("heldout", heldout)):
        with open(args.out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps(doc) + "\n")
        print(f"{name}: {len(docs)} documents, {sum(map(len, docs))} characters")


if __name__ == "__main__":
    main()

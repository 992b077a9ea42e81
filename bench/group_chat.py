"""A multi-speaker group chat for the retrieval-quality benchmark (bench/recall_quality.py).

Eight speakers writing in English, Chinese and Spanish, each with a favourite food, a coming trip
and a job (the topics they share), plus a preference or two. The questions come in three sets:

- first person: asked BY one speaker about themself ("what food do I like?"); expected: that
  speaker's own episode, first;
- third person: asked about one or more named people ("What does Sam do for work?"); expected: the
  set of their episodes, within the top 3;
- irrelevant: nothing in the chat answers them; expected: nothing injected.

Episodes are referred to by `key` ("xu.food"); the benchmark maps keys to the episode ids it stores.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    sender_id: str
    name: str
    language: str


@dataclass(frozen=True)
class Memory:
    key: str
    sender_id: str
    content: str
    days_ago: int
    tags: tuple[str, ...] = ()
    importance: int = 2


@dataclass(frozen=True)
class Question:
    text: str
    expected: frozenset[str]  # memory keys; empty for an irrelevant question
    asker: str = ""  # the speaker asking (first-person questions)
    language: str = "en"


MEMBERS = [
    Member("gc-xuqiang", "徐强", "zh"),
    Member("gc-lina", "李娜", "zh"),
    Member("gc-sam", "Sam", "en"),
    Member("gc-bob", "Bob", "en"),
    Member("gc-alice", "Alice", "en"),
    Member("gc-lucia", "Lucía", "es"),
    Member("gc-mateo", "Mateo", "es"),
    Member("gc-wang", "王芳", "zh"),
]

MEMORIES = [
    # 徐强
    Memory("xu.food", "gc-xuqiang", "我最喜欢吃四川火锅，越辣越好", 12),
    Memory("xu.trip", "gc-xuqiang", "我下周三要去成都出差", 2),
    Memory("xu.job", "gc-xuqiang", "我在一家银行做软件工程师", 40),
    Memory("xu.pref", "gc-xuqiang", "我喜欢简短的回答", 20, ("preference",)),
    # 李娜
    Memory("li.food", "gc-lina", "我爱吃饺子，尤其是猪肉白菜馅的", 8),
    Memory("li.trip", "gc-lina", "今年国庆节我打算去云南旅游", 15),
    Memory("li.job", "gc-lina", "我是一名中学数学老师", 60),
    # Sam
    Memory("sam.food", "gc-sam", "My favourite food is ramen, I eat it every Friday", 5),
    Memory("sam.trip", "gc-sam", "I'm flying to Berlin for a conference next month", 3),
    Memory("sam.job", "gc-sam", "I work as a nurse at the city hospital", 30),
    Memory("sam.pref", "gc-sam", "I prefer short answers", 25, ("preference",)),
    # Bob
    Memory("bob.food", "gc-bob", "I love a good steak with fries", 9),
    Memory("bob.trip", "gc-bob", "Next week I have a business trip to Chicago", 1),
    Memory("bob.job", "gc-bob", "I'm an accountant at a small firm", 45),
    # Alice
    Memory("alice.food", "gc-alice", "I'm vegetarian and my favourite dish is mushroom risotto", 14),
    Memory("alice.trip", "gc-alice", "I'm going hiking in Patagonia in December", 6),
    Memory("alice.job", "gc-alice", "I design mobile apps at a startup", 50),
    Memory("alice.pet", "gc-alice", "My cat is called Miso", 70),
    # Lucía
    Memory("lucia.food", "gc-lucia", "Mi comida favorita es la paella de mariscos", 10),
    Memory("lucia.trip", "gc-lucia", "El mes que viene viajo a Ciudad de México por trabajo", 4),
    Memory("lucia.job", "gc-lucia", "Trabajo como abogada en Madrid", 35),
    # Mateo
    Memory("mateo.food", "gc-mateo", "Me encantan los tacos al pastor", 7),
    Memory("mateo.trip", "gc-mateo", "En verano voy a visitar a mi familia en Buenos Aires", 18),
    Memory("mateo.job", "gc-mateo", "Soy profesor de guitarra", 55),
    Memory("mateo.pref", "gc-mateo", "Prefiero que me respondan en español", 22, ("preference",)),
    # 王芳
    Memory("wang.food", "gc-wang", "我每天早上都要喝一杯咖啡，最爱吃小笼包", 11),
    Memory("wang.trip", "gc-wang", "下个月我要去东京看樱花", 9),
    Memory("wang.job", "gc-wang", "我在医院当护士", 65),
]


def _first(text: str, asker: str, key: str, language: str) -> Question:
    return Question(text, frozenset({key}), asker, language)


def _third(text: str, keys: set[str], language: str = "en") -> Question:
    return Question(text, frozenset(keys), "", language)


FIRST_PERSON = [
    _first("what food do I like?", "gc-xuqiang", "xu.food", "en"),
    _first("我喜欢吃什么", "gc-xuqiang", "xu.food", "zh"),
    _first("我下周去哪里出差?", "gc-xuqiang", "xu.trip", "zh"),
    _first("Where is my next business trip?", "gc-xuqiang", "xu.trip", "en"),
    _first("我是做什么工作的?", "gc-xuqiang", "xu.job", "zh"),
    _first("我喜欢吃什么?", "gc-lina", "li.food", "zh"),
    _first("我国庆节去哪里玩?", "gc-lina", "li.trip", "zh"),
    _first("我的职业是什么?", "gc-lina", "li.job", "zh"),
    _first("what food do I like?", "gc-sam", "sam.food", "en"),
    _first("Where am I travelling next?", "gc-sam", "sam.trip", "en"),
    _first("What is my job?", "gc-sam", "sam.job", "en"),
    _first("what food do I like?", "gc-bob", "bob.food", "en"),
    _first("Where is my next business trip?", "gc-bob", "bob.trip", "en"),
    _first("What do I do for a living?", "gc-bob", "bob.job", "en"),
    _first("What's my favourite dish?", "gc-alice", "alice.food", "en"),
    _first("Where am I going on holiday?", "gc-alice", "alice.trip", "en"),
    _first("What is my job?", "gc-alice", "alice.job", "en"),
    _first("¿Qué comida me gusta?", "gc-lucia", "lucia.food", "es"),
    _first("¿A dónde viajo el mes que viene?", "gc-lucia", "lucia.trip", "es"),
    _first("¿En qué trabajo?", "gc-lucia", "lucia.job", "es"),
    _first("¿qué como yo?", "gc-mateo", "mateo.food", "es"),
    _first("¿A dónde voy en verano?", "gc-mateo", "mateo.trip", "es"),
    _first("¿Cuál es mi profesión?", "gc-mateo", "mateo.job", "es"),
    _first("我早上喜欢喝什么?", "gc-wang", "wang.food", "zh"),
    _first("我下个月去哪儿?", "gc-wang", "wang.trip", "zh"),
    _first("what food do I like?", "gc-wang", "wang.food", "en"),
]

THIRD_PERSON = [
    _third("What does Sam do for work?", {"sam.job"}),
    _third("Where is Bob's business trip?", {"bob.trip"}),
    _third("What is Alice's favourite food?", {"alice.food"}),
    _third("徐强下周去哪里出差?", {"xu.trip"}, "zh"),
    _third("李娜是做什么工作的?", {"li.job"}, "zh"),
    _third("王芳下个月去哪里?", {"wang.trip"}, "zh"),
    _third("¿Dónde trabaja Lucía?", {"lucia.job"}, "es"),
    _third("¿Qué comida le gusta a Mateo?", {"mateo.food"}, "es"),
    _third("Who works as a nurse?", {"sam.job", "wang.job"}),
    _third("Who has a business trip coming up?", {"xu.trip", "bob.trip", "lucia.trip"}),
    _third("Who is a teacher?", {"li.job", "mateo.job"}),
    _third("谁喜欢吃辣的?", {"xu.food"}, "zh"),
    _third("What is Alice's cat called?", {"alice.pet"}),
    _third("Who likes short answers?", {"xu.pref", "sam.pref"}),
]

IRRELEVANT = [
    Question("quantum chromodynamics lecture", frozenset()),
    Question("How do I reset my wifi router?", frozenset()),
    Question("What is the boiling point of tungsten?", frozenset()),
    Question("光合作用的化学方程式是什么?", frozenset(), language="zh"),
    Question("¿Cuál es la capital de Australia?", frozenset(), language="es"),
    Question("Explain the rules of cricket", frozenset()),
    Question("如何给自行车轮胎打气?", frozenset(), language="zh"),
    Question("¿Cómo se calcula la derivada de un logaritmo?", frozenset(), language="es"),
    # What a group chat says most: a reaction, a thank-you, a greeting (round 14: each of these
    # injected Chinese or Spanish memories before, on the model's noise or one shared trigram).
    Question("👍", frozenset()),
    Question("Gracias", frozenset(), language="es"),
    Question("Buenas noches", frozenset(), language="es"),
    Question("¿Qué hora es?", frozenset(), language="es"),
]

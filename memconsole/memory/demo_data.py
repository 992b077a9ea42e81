"""What the demo workspace says (`demo.py` writes it): its bots and chats, its people, and what
each person tells the bot, in English, Chinese and Spanish.

A person has one persona (their favourite food, job, pet, birthday, allergy...), the same in every
chat they are in: what they say *about themselves* (`STABLE`) they say once per chat, and only a
correction (`CORRECTIONS`) changes it. What *happens* to them (`EVENTS`: trips, meetings,
deadlines, runs) is said many times with different words, never twice the same by one person in
one chat. An allergy is never a favourite food, and a profile's preferences never contradict.
"""

from __future__ import annotations

BOTS = [
    (
        "8c6e3f52-support-bot",
        "session",
        ["group_1001", "group_1002", "group_1003", "group_1004", "person_501", "person_502"],
    ),
    ("2b91d7a0-study-buddy", "session", ["group_2001", "group_2002", "person_601", "person_602", "person_603"]),
    ("e47a1c09-family-helper", "bot", ["group_3001", "group_3002", "person_701", "person_702"]),
]
# The session profile's name of each group chat (a private chat is named after its person).
CHAT_NAMES = {
    "group_1001": "Customer support: day shift",
    "group_1002": "Customer support: night shift",
    "group_1003": "Billing questions",
    "group_1004": "Product launch team",
    "group_2001": "Exam study group",
    "group_2002": "Language exchange",
    "group_3001": "Family chat",
    "group_3002": "Weekend plans",
}

EN, ZH, ES = "en", "zh", "es"
NAMES = {
    EN: ["Alice", "Bob", "Carmen", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal", "Lena"],
    ZH: ["王伟", "李娜", "张敏", "刘洋", "陈静", "杨帆", "赵磊", "黄丽", "周杰", "吴芳", "徐强", "孙悦"],
    ES: ["Lucía", "Mateo", "Sofía", "Diego", "Valentina", "Javier", "Camila", "Andrés"],
}

# The words of a persona (drawn once per person) and of events (drawn per event). A key used by a
# language's templates must be in its table.
PERSONA_WORDS = {
    EN: {
        "food": ["dumplings", "paella", "ramen", "tacos", "pizza", "curry"],
        "allergen": ["peanuts", "shellfish", "gluten", "sesame"],
        "job": ["a data engineer", "a nurse", "a teacher", "a product designer", "a translator", "an accountant"],
        "pet": ["Biscuit", "Luna", "Mochi", "Rex", "Pepper"],
        "lang": ["Spanish", "Japanese", "Mandarin", "German", "Portuguese"],
        "month": ["January", "March", "May", "July", "September", "November"],
        "home": ["Lisbon", "Oslo", "Cape Town", "Toronto", "Melbourne"],
    },
    ZH: {
        "food": ["饺子", "火锅", "小笼包", "面条", "烤鸭", "麻婆豆腐"],
        "allergen": ["花生", "海鲜", "芒果", "牛奶"],
        "job": ["老师", "工程师", "医生", "设计师", "会计"],
        "pet": ["咪咪", "小白", "团团", "豆豆"],
        "lang": ["英语", "日语", "西班牙语", "法语"],
        "month": ["三月", "五月", "八月", "十月", "十二月"],
        "home": ["成都", "西安", "杭州", "广州"],
    },
    ES: {
        "food": ["paella", "tacos", "empanadas", "tortilla de patatas", "ceviche", "arepas"],
        "allergen": ["a los cacahuetes", "al marisco", "al gluten", "a la lactosa"],
        "job": ["un hospital", "una escuela", "un estudio de diseño", "una gestoría", "una librería"],
        "pet": ["Canela", "Toby", "Nube", "Lola"],
        "lang": ["inglés", "japonés", "chino", "alemán"],
        "month": ["enero", "marzo", "mayo", "julio", "octubre"],
        "home": ["Sevilla", "Valparaíso", "Medellín", "Oaxaca"],
    },
}
EVENT_WORDS = {
    EN: {
        "place": ["Beijing", "Lisbon", "Kyoto", "Mexico City", "Cape Town", "Oslo", "Hanoi", "Buenos Aires"],
        "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
        "thing": ["budget", "design", "quarterly report", "grant", "thesis"],
        "month": ["January", "March", "May", "July", "September", "November"],
        "ver": ["2.0", "2.1", "3.0", "1.4"],
        "n": ["5", "8", "10", "12"],
        "dish": ["lasagne", "a stir-fry", "soup", "fish tacos", "risotto"],
    },
    ZH: {
        "place": ["北京", "上海", "成都", "西安", "杭州", "广州"],
        "day": ["周一", "周二", "周三", "周四", "周五"],
        "thing": ["报告", "预算", "设计稿", "论文"],
        "n": ["5", "8", "10", "12"],
        "dish": ["火锅", "饺子", "红烧肉", "炒面", "鱼"],
        "topic": ["历史", "心理学", "编程", "摄影", "经济"],
    },
    ES: {
        "place": ["Madrid", "Lima", "Buenos Aires", "Cancún", "Barcelona", "Bogotá"],
        "day": ["lunes", "martes", "miércoles", "jueves", "viernes"],
        "thing": ["informe", "presupuesto", "diseño", "proyecto"],
        "n": ["5", "8", "10", "12"],
        "dish": ["lentejas", "pescado", "paella", "pasta", "pollo asado"],
    },
}

# (template, tags): what a person says about themselves, once per chat.
STABLE = {
    EN: [
        ("My favourite food is {food}", ["food", "preference"]),
        ("I work as {job} and mostly do remote work", ["work", "fact"]),
        ("I have a dog called {pet} who loves long walks", ["pet", "fact"]),
        ("I'm learning {lang} and practise every evening", ["learning", "hobby"]),
        ("My birthday is in {month}", ["personal", "fact"]),
        ("I am allergic to {allergen}", ["health", "fact"]),
        ("My sister lives in {home} and visits every summer", ["family", "fact"]),
    ],
    ZH: [
        ("我最喜欢吃{food}", ["food", "preference"]),
        ("我的工作是{job}", ["work", "fact"]),
        ("我养了一只猫，叫{pet}", ["pet", "fact"]),
        ("我在学{lang}，每天晚上练习半小时", ["learning", "hobby"]),
        ("我的生日在{month}", ["personal", "fact"]),
        ("我对{allergen}过敏", ["health", "fact"]),
        ("我老家在{home}", ["family", "fact"]),
    ],
    ES: [
        ("Mi comida favorita es {food}", ["food", "preference"]),
        ("Trabajo en {job}", ["work", "fact"]),
        ("Tengo un perro que se llama {pet}", ["pet", "fact"]),
        ("Estoy aprendiendo {lang} y practico cada noche", ["learning", "hobby"]),
        ("Mi cumpleaños es en {month}", ["personal", "fact"]),
        ("Tengo alergia {allergen}", ["health", "fact"]),
        ("Mi familia vive en {home}", ["family", "fact"]),
    ],
}
# Said by the people who prefer short answers (their profile says so too).
SHORT_ANSWERS = {
    EN: ("I prefer short answers with bullet points", ["preference", "style"]),
    ZH: ("我更喜欢简短的回答", ["preference", "style"]),
    ES: ("Prefiero respuestas cortas", ["preference", "style"]),
}
# (template, tags): what happens to a person, said again with other words.
EVENTS = {
    EN: [
        ("I'm planning a trip to {place} next month", ["travel", "plan"]),
        ("Our team meeting moved to {day} at 10am", ["work", "schedule"]),
        ("Please remind me about the {thing} deadline on {day}", ["reminder", "deadline"]),
        ("The release of version {ver} is planned for {month}", ["project", "plan"]),
        ("I ran {n} kilometres this weekend", ["sport", "hobby"]),
        ("Can we move the {thing} review to {day}?", ["work", "schedule"]),
        ("I have a dentist appointment on {day}", ["health", "schedule"]),
        ("We're having {dish} for dinner tonight", ["food", "daily"]),
    ],
    ZH: [
        ("我下个月要去{place}旅行", ["travel", "plan"]),
        ("我们的周会改到{day}上午十点", ["work", "schedule"]),
        ("请提醒我{day}交{thing}", ["reminder", "deadline"]),
        ("周末我去公园跑了{n}公里", ["sport", "hobby"]),
        ("我{day}要去看牙医", ["health", "schedule"]),
        ("今天晚上吃{dish}", ["food", "daily"]),
        ("我这周读完了一本关于{topic}的书", ["reading", "hobby"]),
        ("{day}下午要和客户开会", ["work", "schedule"]),
    ],
    ES: [
        ("El mes que viene me voy de viaje a {place}", ["travel", "plan"]),
        ("La reunión del equipo pasó al {day} a las diez", ["work", "schedule"]),
        ("Recuérdame la entrega del {thing} el {day}", ["reminder", "deadline"]),
        ("Este fin de semana corrí {n} kilómetros", ["sport", "hobby"]),
        ("Tengo cita con el dentista el {day}", ["health", "schedule"]),
        ("Esta noche cenamos {dish}", ["food", "daily"]),
    ],
}
# A statement and its correction, keyed by the statement's template: (correction, tags, the word the
# correction changes, or None when it keeps the statement's words; {was} is that word's old value).
# Each supersede chain of the demo is one of these.
CORRECTIONS: dict[str, tuple[str, list[str], str | None]] = {
    "I'm planning a trip to {place} next month": (
        "Correction: the trip to {place} is the month after next, not next month",
        ["correction", "travel"],
        None,
    ),
    "My favourite food is {food}": (
        "Actually my favourite food is {food} now, not {was}",
        ["correction", "food"],
        "food",
    ),
    "Our team meeting moved to {day} at 10am": (
        "Update: the team meeting is on {day} now, not {was}",
        ["fact-update", "work"],
        "day",
    ),
    "I'm learning {lang} and practise every evening": (
        "Update: I stopped learning {was}, I'm learning {lang} now",
        ["fact-update", "learning"],
        "lang",
    ),
    "我最喜欢吃{food}": ("更正：我现在最喜欢吃{food}了，不是{was}", ["correction", "food"], "food"),
    "我们的周会改到{day}上午十点": ("更新：周会从{was}改到{day}了", ["fact-update", "work"], "day"),
    "我下个月要去{place}旅行": ("更正：去{place}的旅行推迟到下下个月", ["correction", "travel"], None),
    "Mi comida favorita es {food}": (
        "En realidad ahora mi comida favorita es {food}, no {was}",
        ["correction", "food"],
        "food",
    ),
    "El mes que viene me voy de viaje a {place}": (
        "Corrección: el viaje a {place} es dentro de dos meses, no el mes que viene",
        ["correction", "travel"],
        None,
    ),
}

TRAITS = {
    EN: ["curious", "direct", "friendly", "detail-oriented", "busy", "night owl", "patient", "funny"],
    ZH: ["好奇", "直接", "友好", "认真", "忙碌", "夜猫子", "耐心", "幽默"],
    ES: ["amable", "paciente", "puntual", "detallista", "optimista", "sociable", "alegre", "responsable"],
}
ANSWERS_IN = {EN: "answers in English", ZH: "answers in Chinese", ES: "answers in Spanish"}
# Each person's other preferences are drawn from here (never two that contradict).
STYLE_PREFERENCES = ["no emojis", "examples first", "formal tone", "links to sources"]

# What the demo's injection snapshots were asked, by the asker's language.
QUERIES = {
    EN: ["what are my travel plans?", "what food do I like?", "when is the team meeting?", "remind me of deadlines"],
    ZH: ["我喜欢吃什么？", "我下个月去哪里？", "周会是哪天？"],
    ES: ["¿qué me gusta comer?", "¿cuándo es la reunión?", "¿adónde voy de viaje?"],
}

#!/usr/bin/env python3
"""Generates eval/routing.jsonl, the labelled routing eval (format: src/routing/eval.rs).

Every prompt and template here was written for Coordinator. The task templates imitate
the *markers* Open WebUI's background tasks carry (`### Task:`, `<chat_history>`, the
JSON key asked for, `stream: false`, `max_tokens` 1000/4), not its exact text, plus a few
admin-rewritten variants. Run: python3 eval/gen_routing.py > eval/routing.jsonl
"""
import json

rows = []


def add(id, prompt, web=False, domain="general", internal=None, **extra):
    row = {"id": id, "prompt": prompt, "web": web, "domain": domain, "internal": internal}
    row.update(extra)
    rows.append(row)


def task(id, kind, prompt, header=None, **extra):
    extra.setdefault("stream", False)
    if header:
        extra["task_header"] = kind
    add(id, prompt, web=False, domain=None, internal=kind, **extra)


def chat(*turns):
    return "\n".join(f"{'USER' if i % 2 == 0 else 'ASSISTANT'}: {t}" for i, t in enumerate(turns))


# --- Seed incidents -------------------------------------------------------------------
PING = "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？"
add("seed-ping", PING, domain="code")
add("seed-kashiwa-weather", "今日の柏市の天気は？", web=True)
add("seed-python-review", "今日学んだPythonコードの実装を復習したい", domain="code")
add("seed-latest-news", "最新ニュースを教えて", web=True)

# --- Task templates (written for this eval) ---------------------------------------------


def std(head, json_hint, history, date=True):
    lines = ["### Task:", head, "### Guidelines:",
             "- Answer in the chat's primary language; default to English if unclear."]
    if date:
        lines.append("- Today's date is 2026-11-29. Latest news or weather are not needed here.")
    lines += ["### Output:", f"JSON format: {json_hint}", "### Chat History:",
              "<chat_history>", history, "</chat_history>"]
    return "\n".join(lines)


def title_t(h):
    return std("Generate a concise 3-5 word title with an emoji summarizing the chat history.",
               '{ "title": "your concise title here" }', h)


def title_old(h):
    return ("### Task:\nCreate a concise, 3-5 word phrase with an emoji as a title for the previous "
            "query. Suitable emojis should enhance understanding; avoid quotation marks.\n"
            "### Output:\nReturn a JSON object: {\"title\": \"...\"}\n\n" + h)


def tags_t(h):
    return std("Generate 1-3 broad tags categorizing the main themes of the chat history, "
               "plus 1-3 more specific subtopic tags.", '{ "tags": ["tag1", "tag2", "tag3"] }', h)


def follow_t(h):
    return std("Suggest 3-5 relevant follow-up questions or prompts the user might naturally ask "
               "next, based on the chat history.", '{ "follow_ups": ["Question 1?", "Question 2?"] }', h)


def query_t(h):
    return std("Analyze the chat history to decide whether search queries are needed, in the given "
               "language. By default prioritize generating 1-3 broad and relevant search queries; "
               "return an empty list only if no search could help. Use the latest information.",
               '{\n  "queries": ["query1", "query2"]\n}', h)


def retrieval_t(h):
    return std("Write 1-3 queries to retrieve documents from the user's knowledge base that answer "
               "the latest question. Focus on the error, code or function names mentioned.",
               '{ "queries": ["query"] }', h, date=False)


def image_t(h):
    return std("Generate a detailed prompt for an image generation task based on the given language "
               "and context. Describe the scene, style, lighting and colors.",
               '{ "prompt": "Your detailed description here." }', h, date=False)


def auto_t(kind, text):
    return ("### Task:\nYou are an autocompletion system. Continue the text in `<text>` based on the "
            "**completion type** in `<type>` and the given language.\n### **Instructions**:\n"
            "1. Analyze `<text>` for context.\n2. Keep the continuation natural and brief.\n"
            "### **Output Rules**:\n- Respond only in JSON: { \"text\": \"<your_completion>\" }\n"
            f"<type>{kind}</type>\n<text>{text}</text>")


def compaction_t(h):
    return ("### Task:\nThe conversation below is getting long. Write a compact summary of the "
            "conversation so far that keeps facts, decisions, code snippets and open questions, so it "
            "can replace the older messages.\n### Conversation:\n<chat_history>\n" + h + "\n</chat_history>")


def emoji_t(msg):
    return ("Your task is to reflect the speaker's likely facial expression through a fitting emoji. "
            "Interpret emotions from the message and reflect their facial expression using fitting, "
            "diverse emojis (e.g., 😊, 😢, 😡, 😱).\n\nMessage: ```" + msg + "```")


def moa_t(q):
    return (f'You have been provided with a set of responses from various models to the latest user '
            f'query: "{q}"\n\nYour task is to synthesize these responses into a single, high-quality '
            f'response. Critically evaluate the information.\n\nResponses from models: """{q}の答えA"""\n\n"""答えB"""')


TOOLS_SYS = ("Available Tools: [{\"name\": \"search_web\", \"description\": \"Search the web for the latest news\", "
             "\"parameters\": {\"query\": \"string\"}}, {\"name\": \"get_weather\", \"description\": \"Today's weather\"}]\n\n"
             "Your task is to choose and return the correct tool(s) from the list of available tools based on the query.\n"
             "Return only the JSON object, without any additional text: {\"tool_calls\": [{\"name\": \"toolName1\", \"parameters\": {\"key1\": \"value1\"}}]}\n"
             "If no tools match the query, return an empty array: {\"tool_calls\": []}")
MEMORY_SYS = "You are Open WebUI's private memory reviewer. Return only valid JSON."

JA1 = chat(PING, "`sudo apt install iputils-ping` でインストールできます。")
JA2 = chat("今日の柏市の天気は？", "晴れ時々曇り、最高気温は18度の予報です。", "明日は？")
JA3 = chat("週末に京都へ行きます。おすすめの観光地は？", "清水寺や伏見稲荷が定番です。")
EN1 = chat("How do I fix 'permission denied' when running docker without sudo?",
           "Add your user to the docker group and log in again.")
EN2 = chat("What's the latest news on the Mars sample return mission?", "Here is a summary of recent reports...")
EN3 = chat("Give me a recipe for vegan ramen", "Sure! Start with a kombu and shiitake broth...")
LONG = chat("Pythonで大量のCSVを高速に読み込みたい。" + "pandasとpolarsの違いも知りたい。" * 60,
            "polarsはマルチスレッドで高速です。" * 40)

histories = [("ja1", JA1), ("ja2", JA2), ("ja3", JA3), ("en1", EN1), ("en2", EN2), ("en3", EN3), ("long", LONG)]
for name, h in histories:
    task(f"title-{name}", "title_generation", title_t(h), max_tokens=1000)
    task(f"query-{name}", "query_generation", query_t(h))
for name, h in histories[:5]:
    task(f"tags-{name}", "tags_generation", tags_t(h))
    task(f"followup-{name}", "follow_up_generation", follow_t(h))
task("title-old-ja", "title_generation", title_old(JA3), max_tokens=1000)
task("title-old-en", "title_generation", title_old(EN3), max_tokens=1000)
task("retrieval-en1", "query_generation", retrieval_t(EN1))
task("retrieval-ja1", "query_generation", retrieval_t(JA1))
task("image-ja", "image_prompt_generation", image_t(chat("夕暮れの富士山と湖を描いて")))
task("image-en", "image_prompt_generation", image_t(chat("Draw a cozy cabin in a snowy forest at night")))
task("auto-en", "autocomplete_generation", auto_t("General", "What is the latest"))
task("auto-ja", "autocomplete_generation", auto_t("search query", "今日の天気"))
task("compaction-ja", "context_compaction", compaction_t(LONG))
task("compaction-en", "context_compaction", compaction_t(EN1 + "\n" + EN2))
task("emoji-ja", "emoji_generation", emoji_t("やった！テストに合格した！"), max_tokens=4)
task("emoji-en", "emoji_generation", emoji_t("Ugh, the build failed again with the same error today"), max_tokens=4)
task("moa-ja", "moa_response_generation", moa_t("今日のニュースを要約して"), stream=True)
task("moa-en", "moa_response_generation", moa_t("What's the weather today in Paris?"))
task("fc-legacy-ja", "function_calling", "Query: 今日の柏市の天気は？", system=TOOLS_SYS)
task("fc-legacy-history", "function_calling",
     "History:\nUSER: 最新ニュースは？\nASSISTANT: どの分野ですか？\nQuery: 経済のニュース", system=TOOLS_SYS)
task("memory-review", "memory_review",
     "Recent conversation:\nUSER: I moved to Kashiwa last month and I code in Rust.\n"
     "Existing memories: []\nReturn {\"operations\": [...]}", system=MEMORY_SYS)

# With the X-OpenWebUI-Task header (any text; the header decides).
task("hdr-title", "title_generation", title_t(JA2), header=True, max_tokens=1000)
task("hdr-tags", "tags_generation", tags_t(EN2), header=True)
task("hdr-followup", "follow_up_generation", follow_t(JA3), header=True)
task("hdr-query", "query_generation", query_t(EN2), header=True)
task("hdr-emoji", "emoji_generation", emoji_t("悲しい…"), header=True, max_tokens=4)
task("hdr-moa", "moa_response_generation", moa_t("Explain Rust lifetimes"), header=True, stream=True)
task("hdr-compaction", "context_compaction", "Summarize everything above briefly.", header=True)
task("hdr-memory", "memory_review", "Review: the user likes today's weather news.", header=True)
task("hdr-fc", "function_calling", "Query: what's the latest news?", header=True)
task("hdr-image", "image_prompt_generation", "Describe an image of today's sunset.", header=True)
task("hdr-auto", "autocomplete_generation", "Complete: the latest version of", header=True)

# Admin-rewritten templates (no "### Task:", other wording; the JSON key remains).
task("custom-title-ja", "title_generation",
     "以下の会話に、日本語で15文字以内のタイトルを付けてください。絵文字は不要です。\n"
     "出力は JSON のみ: {\"title\": \"タイトル\"}\n\n" + JA2, max_tokens=1000)
task("custom-tags-ja", "tags_generation",
     "会話の内容を表すタグを最大3つ。JSONで返答: {\"tags\": [\"タグ\"]}\n<chat_history>\n" + JA3 + "\n</chat_history>")
task("custom-query-en", "query_generation",
     "You write web search queries. Today is 2026-11-29. Reply with JSON only, like "
     "{'queries': ['...']}. Latest news matters.\n\n" + EN2 + "\nUSER: and the current status?")
task("custom-followup-en", "follow_up_generation",
     "### Task: Propose next questions.\nOutput JSON {\"follow_ups\": [...]} and nothing else.\n" + EN3)
task("custom-image-ja", "image_prompt_generation",
     "### Task:\n画像生成用の英語プロンプトを作る。JSON: {\"prompt\": \"...\"} で返す。image prompt only.\n" + chat("猫が宇宙を飛んでいる絵"))

# --- RAG-augmented user turns (user turns: no internal task; retrieved context, no web) ---


def rag(q, src="The 2.1 release fixed the login error and added a dark mode."):
    return ("### Task:\nRespond to the user query using the provided context, with inline citations "
            "[id] where a source has an id.\n### Guidelines:\n- If you don't know, say so.\n"
            "- Today's date is 2026-11-29.\n<context>\n<source id=\"1\" name=\"release-notes.md\">" + src +
            "</source>\n</context>\n\n" + q)


add("rag-ja-release", rag("最新リリースで何が変わった？"))
add("rag-en-weather", rag("What's the weather like today?", "Kashiwa: sunny, 18°C."))
add("rag-ja-code", rag("このドキュメントのPythonコードの実装を説明して", "def load(): ..."), domain="code")
add("rag-en-error", rag("Why does the login error happen and how do I fix the bug?"), domain="code")
add("rag-ja-summary", rag("この資料を3行で要約して", "社内規程: 休暇申請は3日前までに..."))
add("rag-en-news", rag("Summarize the latest news in these sources", "Headline: rates unchanged."))
add("rag-nostream", rag("今日の会議の議事録のポイントは？", "議事録: 予算承認、次回は12月"), stream=False)
add("rag-ja-weather", rag("柏市の天気は？", "柏市: 晴れ"))

# --- Long pasted logs / code with web words (never web) ---------------------------------
log = "\n".join(f"2026-11-29 09:{i:02d}:13 ERROR [sync] latest news feed fetch failed today: timeout"
                for i in range(60))
add("log-news-feed", log + "\nこのログの原因は？", domain="code")
add("log-en", "Here is today's log:\n" + log + "\nWhat is going wrong?", domain="code")
journal = "\n".join(f"Nov 29 10:{i:02d}:01 moon ollama[812]: current weather plugin error: connection refused"
                    for i in range(40))
add("log-journal", journal + "\nWhy does ollama keep failing?", domain="code")
trace = ("Traceback (most recent call last):\n  File \"weather.py\", line 12, in <module>\n"
         "    data = fetch_latest_news(today)\nKeyError: 'today'\n")
add("trace-py", trace + "How do I fix this?", domain="code")
add("trace-ja", trace * 20 + "今日中に直したい。原因は？", domain="code")
rust = ("```rust\nfn latest_news(today: Date) -> Vec<News> {\n    todo!()\n}\n```\n")
add("code-fence-rust", rust + "Why doesn't this compile?", domain="code")
add("code-fence-ja", rust + "この関数の天気取得部分を実装して", domain="code")
js = "```js\nconst weather = await fetch('/api/weather?date=today');\nconsole.log(weather.current);\n```\n"
add("code-fence-js", js + "What's wrong here?", domain="code")
add("panic-rust", "thread 'main' panicked at src/main.rs:14:5:\ncalled `Option::unwrap()` on a `None` value\n"
    "note: run with `RUST_BACKTRACE=1`\nなぜ？", domain="code")
add("npm-err", "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
    "npm ERR! Found: react@19.0.0 (latest)\nhow do I solve it today?", domain="code")
add("shell-session", "$ docker compose up\nError response from daemon: port is already allocated\n"
    "What should I do?", domain="code")

# --- Code questions -----------------------------------------------------------------------
code_q = [
    "Pythonでリストを逆順にする方法は？", "Rustの所有権とライフタイムを説明して",
    "JavaScriptのPromiseとasync/awaitの違いは？", "Gitでコミットを取り消したい",
    "Dockerコンテナのログを見るコマンドは？", "SQLで重複行を削除するクエリを書いて",
    "正規表現でメールアドレスを検証したい", "このエラーの意味は？ ModuleNotFoundError: No module named 'numpy'",
    "TypeScriptの型ガードの書き方", "bashでファイルを一括リネームするスクリプト",
    "How do I reverse a linked list in Java?", "Explain the difference between a process and a thread in Linux",
    "Write a Python function that checks if a string is a palindrome",
    "What does `git rebase -i` do?", "How can I speed up my SQL query with an index?",
    "My React component re-renders infinitely, why?", "Convert this JSON to YAML: {\"a\": 1}",
    "How do I install CUDA on Ubuntu 24.04?", "What is a segmentation fault in C++?",
    "Implement binary search in Go", "Kubernetesのpodが再起動を繰り返す。原因の調べ方は？",
    "ollamaでモデルをGPUで動かす設定は？", "nginxでリバースプロキシを設定したい",
    "Pythonの最新版で追加された機能の使い方を例文付きで解説して",
    "What's the latest way to implement authentication in Django?",
    "How do I debug a memory leak in Node.js?", "systemdのサービスが起動しない。journalctlの見方は？",
    "ExcelのVBAでセルを一括変換したい", "C#でJSONをデシリアライズする方法",
    "sshで公開鍵認証ができない。Permission denied (publickey) と出る",
]
for i, q in enumerate(code_q):
    add(f"code-{i:02d}", q, domain="code")

# --- Web questions ------------------------------------------------------------------------
web_q = [
    ("明日の東京の天気予報は？", "general"), ("大阪の今週の天気は？", "general"),
    ("今日のニュースで大きなものは？", "general"), ("ドル円の為替レートを教えて", "general"),
    ("トヨタの株価は今いくら？", "general"), ("地震速報は出てる？", "general"),
    ("台風10号の進路は？", "general"), ("現在の日経平均は？", "general"),
    ("今年のノーベル文学賞は誰？", "general"), ("昨日の日本シリーズの結果は？", "general"),
    ("最近発表されたiPhoneの価格は？", "general"), ("今日は何の日？", "general"),
    ("JRの運行状況を知りたい", "general"), ("今夜のサッカー代表戦は何時から？", "general"),
    ("What's the weather in Osaka tomorrow?", "general"), ("Any breaking news right now?", "general"),
    ("What is the current price of Bitcoin?", "general"), ("Latest headlines about the Fed?", "general"),
    ("who won the election yesterday", "general"), ("Who is currently the prime minister of Japan?", "general"),
    ("What's the USD to EUR exchange rate today?", "general"), ("Weather forecast for Kashiwa this weekend", "general"),
    ("Who won the World Series this year?", "general"), ("What movies are in theaters this week?", "general"),
    ("Is it going to rain today in Tokyo?", "general"), ("What's the latest version of Rust?", "code"),
    ("Python最新バージョンはいつリリースされた？", "code"), ("Give me today's top tech news", "general"),
    ("NVIDIAの株価の最新情報", "general"), ("What happened in the news today?", "general"),
]
for i, (q, d) in enumerate(web_q):
    add(f"web-{i:02d}", q, web=True, domain=d)

# --- Everyday chat and near misses (no web) -------------------------------------------------
general_q = [
    "こんにちは", "今日は疲れた", "おすすめの映画を教えて", "カレーの作り方は？", "俳句を一つ作って",
    "英語で「よろしくお願いします」は？", "猫と犬、どっちが飼いやすい？", "睡眠の質を上げるコツ",
    "天気という単語の英訳と例文を教えて", "現在完了形の使い方を説明して", "ニュース記事の書き方を解説して",
    "最新の研究を要約する練習をしたい。コツを説明して",
    "Write a haiku about autumn", "I feel great today", "Tell me a joke",
    "How do I write a newsletter signup paragraph for my bakery?", "I'm currently reading a novel by Murakami",
    "Explain the latest theory of dark matter in simple terms", "What is the capital of Australia?",
    "Summarize the plot of Hamlet", "Translate 'good morning' into French",
    "What's a good name for a golden retriever?", "Give me a 3-day workout plan",
    "Today I learned how bread rises. Explain the chemistry.",
    "ありがとう、助かりました", "プレゼンの構成案を考えて", "旅行の持ち物リストを作って",
    "数学の微分を高校生向けに説明して", "Give me three tips for a job interview",
    "What should I say in a thank-you card?",
]
for i, q in enumerate(general_q):
    add(f"chat-{i:02d}", q)

# Non-UI clients: stream false, one message, asking for JSON (still user turns).
add("api-json-title", "Give me a JSON object with a \"title\" for my blog post about sourdough", domain=None, stream=False, max_tokens=1000)
add("api-tags", "Suggest tags for my photo of Mt. Fuji as JSON {\"tags\": [...]}", domain=None, stream=False)
add("api-task-ja", "### Task: 今日のToDoを3つ考えて", stream=False)
add("history-user", "それで、さっきの話の続きは？", messages=[{"role": "user", "content": "猫の話"},
                                                    {"role": "assistant", "content": "猫はかわいい"}])

# --- Held-out set: written after the rules were tuned, labelled by judgment, not re-tuned ---
held = [
    ("ho-01", "来週の大阪の天気はどう？", True, "general"),
    ("ho-02", "今の円相場ってどうなってる？", True, "general"),
    ("ho-03", "What's trending on the news this morning?", True, "general"),
    ("ho-04", "How much is a Tesla share worth right now?", True, "general"),
    ("ho-05", "Did it snow in Sapporo yesterday?", True, "general"),
    ("ho-06", "今年の紅白の出場者は？", True, "general"),
    ("ho-07", "Latest score of the Dodgers game?", True, "general"),
    ("ho-08", "今日のおすすめの夕飯は？", False, "general"),
    ("ho-09", "明日のプレゼンが不安です。どうしたらいい？", False, "general"),
    ("ho-10", "What's the current best practice for password hashing in Go?", False, "code"),
    ("ho-11", "天気予報アプリをFlutterで実装したい", False, "code"),
    ("ho-12", "Write a Python script that fetches today's weather from an API", False, "code"),
    ("ho-13", "ニュースサイトをスクレイピングするコードを書いて", False, "code"),
    ("ho-14", "How do I print the current date in bash?", False, "code"),
    ("ho-15", "Rustでcurrent_dirを取得するには？", False, "code"),
    ("ho-16", "I love rainy weather, it makes me calm", False, "general"),
    ("ho-17", "The news made me sad today.", False, "general"),
    ("ho-18", "Recommend a recent sci-fi novel", False, "general"),
    ("ho-19", "最近ハマっている趣味の話をしよう", False, "general"),
    ("ho-20", "昨日の夢の意味を占って", False, "general"),
    ("ho-21", "My laptop fan is loud, what can I do?", False, "general"),
    ("ho-22", "iPhoneのバッテリーを長持ちさせるには？", False, "general"),
    ("ho-23", "What's the difference between let and const in JavaScript?", False, "code"),
    ("ho-24", "なぜ空は青いの？", False, "general"),
]
for id, q, web, dom in held:
    add(id, q, web=web, domain=dom)

for r in rows:
    print(json.dumps(r, ensure_ascii=False))

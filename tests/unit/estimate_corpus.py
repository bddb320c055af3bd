# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Deterministic corpora for fitting and validating the token estimate.

Every document is generated from a seeded `random.Random`, so the corpora are identical on
every machine and need no files. The training and validation corpora differ in seed AND
in source material: English sentences, identifier words, CJK phrases and names are split
in two halves, and each corpus draws from its own half only. A weight that merely
memorised the training text would therefore show up as error on the validation side.

`corpus(split)` returns `{kind: [documents]}` for the kinds in `KINDS`.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from typing import Any

KINDS = (
    "json_compact",
    "json_indented",
    "tool_definitions",
    "prose",
    "code",
    "minified_js",
    "cjk",
    "base64",
    "numbers",
    "mixed",
)

TRAIN = "train"
VALIDATION = "validation"
_SEEDS = {TRAIN: 20240611, VALIDATION: 977_331}

# Sentences written for this corpus (no external text). Even indices feed the training
# corpus, odd ones the validation corpus.
_SENTENCES = (
    "The river had risen overnight, and by morning the old stone bridge stood alone in a sheet of "
    "brown water.",
    "She kept a notebook of every recipe her grandmother cooked, including the ones that failed.",
    "A server that answers slowly is often worse than one that does not answer at all.",
    "Nobody in the village could remember who had planted the row of walnut trees along the road.",
    "When the committee finally met, the budget had already been spent twice over.",
    "Light from the lighthouse swept across the harbour every eleven seconds, regular as a heartbeat.",
    "He argued that the map was wrong, but the mountain did not care about his opinion.",
    "Most of the cost of a large system lies in maintaining it, not in writing it the first time.",
    "The museum's smallest exhibit was a single seed, found in a jar sealed more than two thousand "
    "years ago.",
    "Rain drummed on the tin roof while the children counted the seconds between lightning and thunder.",
    "If the cache is cold, the first request pays for everyone who comes after it.",
    "The apprentice learned to sharpen chisels for a whole month before he was allowed to touch the wood.",
    "Winter arrived early that year, and the geese left the lake before the first frost.",
    "Every measurement carries an error; the honest thing is to say how large it is.",
    "The train to the coast was late again, so the passengers shared sandwiches and stories on the platform.",
    "A good error message names the input that caused it and suggests what to do next.",
    "They repaired the fishing nets by lantern light, talking quietly about the price of diesel.",
    "The library opened at nine, but the queue of students started forming well before eight.",
    "Copper roofs turn green over decades as the metal slowly reacts with the air and the rain.",
    "Her first program printed a single line of text, and she remembered the thrill for years.",
    "The bakery sold out of rye bread by noon, which annoyed the regular customers from the mill.",
    "Bees communicate the direction of flowers with a dance whose angle points toward the sun.",
    "A contract that nobody reads is a contract that nobody follows.",
    "On the third day of the expedition, the radio stopped working and the maps got wet.",
    "Testing only the happy path is like checking a parachute by looking at the bag.",
    "The harbour master logged every ship that entered, its cargo, its flag and the hour of arrival.",
    "Old houses creak at night because the wooden beams shrink as the temperature drops.",
    "The violinist tuned her instrument twice, then played the whole sonata without looking at the score.",
    "Logs are only useful if someone can find the right line when something breaks at three in the morning.",
    "Salt was once so valuable that soldiers were sometimes paid with it.",
    "The garden looked wild, but every plant in it had been chosen for the bees and the birds.",
    "Compression works because real data repeats itself far more than random noise ever does.",
    "In the spring the meadow fills with poppies, and tourists stop their cars to take photographs.",
    "The final report was forty pages long, yet the important finding fit on a single line.",
    "Owls can turn their heads much further than people can, though not all the way around.",
    "A queue without a bound is a memory leak that has not happened yet.",
    "The blacksmith's hammer rang across the square from dawn until the church bells called noon.",
    "Her grandfather had built the clock himself, and it still lost exactly one minute every week.",
    "Glaciers move slowly, but over centuries they carve valleys deep enough to hold entire towns.",
    "The deployment failed because a single configuration value had a trailing space.",
    "Children in the north learn to ski before they can properly ride a bicycle.",
    "Weather forecasts improved dramatically once satellites could photograph clouds from above.",
    "The auditor asked for receipts, and the treasurer produced a shoebox full of crumpled paper.",
    "Documentation that lies is worse than no documentation, because people trust it.",
    "Farmers watched the sky for signs of hail, since one storm could ruin a year of work.",
    "The orchestra rehearsed the opening bars for an hour until the conductor finally smiled.",
    "Every new dependency is a promise to keep up with someone else's release schedule.",
    "The ferry crossed the strait four times a day, weather permitting, which it often did not.",
    "Some of the oldest trees on earth grow on dry mountain slopes where little else survives.",
    "The patch fixed the crash, but it also doubled the start-up time, so it was reverted.",
    "Postcards from the seaside arrived weeks after the travellers had already returned home.",
    "Monitoring tells you that something is wrong; tracing tells you where.",
    "The cathedral took three generations to build, and none of the first masons saw it finished.",
    "A cat asleep in a sunny window is the most convincing argument for doing nothing.",
    "The spreadsheet had grown to twelve thousand rows, and nobody dared to delete a single column.",
    "Frost painted ferns on the inside of the windows during the coldest week of January.",
    "Benchmarks lie most convincingly when they are run only once.",
    "The tailor measured him three times, muttering numbers, before cutting a single piece of cloth.",
    "Wolves returned to the valley after an absence of almost a century.",
    "If you cannot explain a design to a colleague in five minutes, it is probably too clever.",
    "The market opened before sunrise, and by seven the best tomatoes were gone.",
    "Volcanic soil is remarkably fertile, which is why people keep farming beneath active volcanoes.",
    "A timeout is a decision about how long you are willing to be wrong.",
    "The poet rewrote the last stanza seventeen times and then went back to the first version.",
    "Migrating the database took a weekend, and verifying the migration took another month.",
    "Tides are caused mostly by the moon, with a smaller push from the sun.",
    "The school play was a triumph, even though the dragon's head fell off in the second act.",
    "Users rarely read instructions, so the interface itself has to explain what comes next.",
    "The stationmaster kept geraniums on every windowsill of the little red building.",
    "Caching the wrong thing is an elegant way to serve stale answers very quickly.",
    "A single candle can be seen from surprisingly far away on a clear, moonless night.",
    "The negotiations stalled over a single clause about who would pay for the shipping.",
    "Mushrooms appeared in the forest two days after the heavy rain, as if from nowhere.",
    "Security reviews are cheapest before the code is written and most expensive after the breach.",
    "The old sailor claimed he could smell a storm coming a full day before it arrived.",
    "Reading the source is slower than reading the manual, but it is always up to date.",
    "The painter mixed her own colours from ground stones, oil and a secret pinch of ash.",
    "Counting tokens exactly matters when every thousand of them has a price.",
    "Snow muffles sound so well that a city can feel like a village on the morning after a blizzard.",
    "The intern found the bug in ten minutes, after the senior engineers had searched for two days.",
    "Licensee shall not sublicense, distribute or otherwise transfer the Software except as "
    "expressly permitted herein.",
    "Use `--verbose` to print every request, or set `LOG_LEVEL=debug` in the environment before "
    "starting the daemon.",
    "Photosynthesis converts carbon dioxide and water into glucose, releasing oxygen as a by-product.",
    "The `timeout` parameter is measured in seconds; a value of zero disables the limit entirely.",
    "Notwithstanding the foregoing, the obligations under this section survive termination of the agreement.",
    "Returns a list of dictionaries, one per matching record, ordered by creation time (newest first).",
    "Installation instructions are at https://example.com/docs/getting-started, including a "
    "troubleshooting section.",
    "Approximately 71% of the Earth's surface is covered by water, most of it in the oceans.",
    "Configuration precedence is: command-line flags, then environment variables, then the "
    "configuration file.",
    "The manuscript, written in iron-gall ink on vellum, had survived fires, floods and at least "
    "one careless archivist.",
    "Deprecated since version 3.2: pass `strict=True` instead; the old keyword will be removed in 4.0.",
    "Thermodynamics forbids a perpetual-motion machine, yet inventors keep submitting patent "
    "applications for them.",
    "Each worker acquires a lease, processes up to 500 messages, and releases the lease before exiting.",
    "Her dissertation examined seventeenth-century shipbuilding contracts in the archives of "
    "Amsterdam and Antwerp.",
    "If the checksum does not match, the download is discarded and an `IntegrityError` is raised.",
    "The committee's recommendations, published in March, emphasised transparency, accountability "
    "and independent oversight.",
    "Memory usage grows linearly with the number of open connections, roughly 64 KiB each.",
    "Archaeologists uncovered pottery fragments, bronze tools and the foundations of a Roman bathhouse.",
    "Subsequent requests reuse the pooled connection unless `keep_alive` is explicitly set to false.",
    "In witness whereof, the parties have executed this agreement as of the date first written above.",
    "The algorithm runs in O(n log n) time and needs O(n) auxiliary space for the merge step.",
    "Hydrogen, helium and traces of lithium were the only elements produced in the first minutes "
    "after the Big Bang.",
    "Rotate credentials at least every ninety days, and immediately after anyone with access leaves "
    "the team.",
    "The orchestra's programme included Beethoven's Seventh Symphony and a newly commissioned "
    "concerto for cello.",
    "Pagination uses opaque cursors: pass the `next_cursor` value from one response into the "
    "following request.",
    "Unauthorised reproduction, modification or redistribution of these materials is strictly prohibited.",
    "Fermentation transforms sugars into alcohol and carbon dioxide, a process humans have "
    "exploited for millennia.",
    "When the queue exceeds its high-water mark, producers block until consumers catch up.",
    "The cartographer's apprentices spent entire winters copying coastlines from older, frequently "
    "inaccurate charts.",
    "Errors are reported as JSON objects with `code`, `message` and an optional `details` array.",
    "Biodiversity in tropical rainforests far exceeds that of temperate woodlands of comparable area.",
    "All timestamps are UTC and formatted according to RFC 3339, for example 2024-05-01T12:30:00Z.",
    "Indemnification obligations hereunder are conditioned upon prompt written notice of any claim.",
    "The microscope revealed thousands of single-celled organisms swimming in a drop of pond water.",
    "Set `max_retries` to a small number; retrying forever only hides the underlying outage.",
    "Medieval monasteries preserved classical texts by copying them, often with marginal notes and "
    "small illustrations.",
    "Rate limits apply per API key: 60 requests per minute, with bursts of up to 120.",
    "Electromagnetic radiation spans wavelengths from kilometre-long radio waves to gamma rays "
    "shorter than an atom.",
    "Breaking changes are listed in CHANGELOG.md under a heading for each major version.",
    "Constitutional amendments require ratification by three quarters of the states before taking effect.",
)


def _words(text: str) -> list[str]:
    return text.split()


# Words for identifiers, keys and tool names; split in halves like the sentences.
_WORDS = _words(
    "user account order invoice item price total status created updated name email address city "
    "country region token session request response payload message channel file path size count limit "
    "offset query filter sort page result error code detail config option value key type kind label "
    "tag owner group member role permission project task issue comment author title body summary "
    "description timestamp duration latency metric event span trace service host port version build "
    "release branch commit repository customer product warehouse shipment carrier tracking balance "
    "currency amount discount tax rate schedule calendar meeting attendee location weather forecast "
    "temperature humidity pressure station sensor reading device firmware battery network signal "
    "channel ticket priority assignee reporter sprint board column card checklist document folder "
    "share link preview thumbnail width height format encoding language locale timezone"
)

_FIRST_NAMES = _words(
    "Alice Bruno Chen Dagny Emeka Farah Goran Hana Ivan Jun Kofi Lena Mateo Nadia Oskar Priya Quinn "
    "Rosa Sami Tove Umar Vera Wei Ximena Yusuf Zora"
)
_LAST_NAMES = _words(
    "Andersen Baptiste Castillo Dubois Eriksson Fischer Garcia Haddad Ito Jansen Kowalski Lindqvist "
    "Moreau Nakamura Okafor Petrov Quispe Rossi Schmidt Tanaka Ueda Varga Weber Xu Yilmaz Zhang"
)
_CITIES = _words(
    "Lisbon Oslo Nairobi Osaka Lima Tallinn Porto Quito Dakar Hanoi Perth Bergen Zagreb Cusco Accra "
    "Kyoto Split Malmo Turku Gdansk"
)

# CJK sentences written for this corpus. Real text, not random code points: o200k has many
# multi-character CJK tokens, so random characters would cost about a quarter more tokens
# than real prose does.
_CHINESE = (
    "今天天气很好，我们一起去公园散步吧。",
    "这个系统每天处理超过一百万个用户请求。",
    "如果服务器没有响应，请检查网络连接是否正常。",
    "他在北京工作了五年，后来搬到了上海。",
    "数据库的备份每天凌晨三点自动执行。",
    "我们需要在下周五之前完成这个项目的第一阶段。",
    "这本书讲述了一个普通家庭在战争年代的故事。",
    "请在提交代码之前运行所有的单元测试。",
    "城市的交通问题越来越严重，政府正在考虑新的解决方案。",
    "她每天早上六点起床，先跑步，然后吃早饭。",
    "错误信息应该清楚地说明问题出在哪里。",
    "这家餐厅的饺子非常有名，周末总是排长队。",
    "人工智能的发展给很多行业带来了深刻的变化。",
    "由于大雨，今天下午的航班全部取消了。",
    "老师告诉学生们，学习最重要的是保持好奇心。",
    "新版本修复了三个安全漏洞，并提高了运行速度。",
    "在資訊科技快速發展的今天，軟體開發的速度非常重要。",
    "這個問題我們已經討論過很多次了，還是沒有結論。",
    "春天来了，山上的花都开了，到处都是游客。",
    "每个月的电费账单都比上个月高一点。",
    "如果缓存已满，系统会删除最久没有使用的条目。",
    "会议记录已经发到大家的邮箱里了，请查收。",
    "小明的爷爷年轻时是一名火车司机。",
    "请不要把密码写在纸上，也不要告诉任何人。",
    "根据最新的统计数据，全国互联网用户已经超过十亿人。",
    "该函数接收一个字符串参数，并返回解析后的对象。",
    "由于内存泄漏，服务在运行七十二小时后会自动崩溃。",
    "历史学家认为，这座古城的城墙建于明朝初年。",
    "部署脚本会先停止旧版本，再启动新版本并检查健康状态。",
    "研究人员发现，适量运动可以显著改善睡眠质量。",
    "所有接口都必须经过身份验证，否则返回四零一错误。",
    "黄河是中华文明的发源地之一，全长约五千四百公里。",
    "我們建議使用者定期更新軟體，以避免安全風險。",
    "該公司去年的營業收入比前年增長了百分之十五。",
    "配置文件采用 YAML 格式，默认路径是当前目录。",
    "在 2024 年的开发者调查中，Python 再次成为最受欢迎的语言之一。",
    "日志级别可以设置为调试、信息、警告或错误。",
    "这位作家的小说被翻译成三十多种语言，在世界各地出版。",
    "如果请求超时，客户端会在五秒后自动重试。",
    "秋天的香山红叶漫山遍野，吸引了大批摄影爱好者。",
)
_JAPANESE = (
    "今日はとても暑いので、冷たい飲み物が欲しいです。",
    "このサーバーは毎日百万件以上のリクエストを処理しています。",
    "会議は午後三時から始まる予定ですが、少し遅れるかもしれません。",
    "駅の近くに新しいラーメン屋ができたそうです。",
    "エラーが発生した場合は、ログファイルを確認してください。",
    "彼女は東京の大学で日本の歴史を勉強しています。",
    "来週の月曜日までにレポートを提出しなければなりません。",
    "データベースのバックアップは毎晩自動的に実行されます。",
    "雨が降っていたので、私たちは家で映画を見ました。",
    "このアプリを使えば、簡単に写真を整理することができます。",
    "新しいバージョンでは、いくつかのバグが修正されました。",
    "京都には古いお寺や神社がたくさんあります。",
    "パスワードは定期的に変更することをおすすめします。",
    "子供のころ、祖母の家でよく猫と遊んでいました。",
    "電車が遅れたため、約束の時間に間に合いませんでした。",
    "この料理は簡単で、三十分ぐらいで作れます。",
    "ネットワークの設定を変更した後、再起動してください。",
    "春になると、公園の桜がとてもきれいに咲きます。",
    "お問い合わせの内容を確認して、担当者からご連絡いたします。",
    "山の上から見た景色は本当に素晴らしかったです。",
    "キャッシュが古くなっている可能性があります。",
    "私の趣味は本を読むことと、ギターを弾くことです。",
    "テストがすべて成功したら、本番環境にデプロイします。",
    "週末は家族と一緒に海へ行く予定です。",
    "最新の統計によると、国内の利用者数は一億人を超えました。",
    "この関数は文字列を受け取り、解析したオブジェクトを返します。",
    "メモリリークのため、サービスは七十二時間後に停止してしまいます。",
    "歴史学者によれば、この城は江戸時代の初めに建てられました。",
    "デプロイスクリプトは古いバージョンを停止してから新しいバージョンを起動します。",
    "研究者たちは、適度な運動が睡眠の質を改善することを発見しました。",
    "すべての API は認証が必要で、認証されていない場合は 401 エラーを返します。",
    "富士山は日本で最も高い山で、標高は三千七百七十六メートルです。",
    "設定ファイルは YAML 形式で、既定の場所はホームディレクトリです。",
    "2024 年の調査では、Python が最も人気のある言語の一つでした。",
    "ログレベルはデバッグ、情報、警告、エラーのいずれかに設定できます。",
    "この作家の小説は三十以上の言語に翻訳され、世界中で読まれています。",
    "リクエストがタイムアウトした場合、クライアントは五秒後に再試行します。",
    "秋になると、山々は赤や黄色の紅葉で美しく彩られます。",
    "会社の売上高は前年と比べて十五パーセント増加しました。",
    "利用規約に同意した上で、アカウントを作成してください。",
)
_KOREAN = (
    "오늘은 날씨가 정말 좋아서 공원에 산책하러 갔습니다.",
    "이 서버는 하루에 백만 건 이상의 요청을 처리합니다.",
    "회의는 오후 세 시에 시작될 예정입니다.",
    "오류가 발생하면 로그 파일을 먼저 확인해 주세요.",
    "저는 서울에서 태어나서 부산에서 자랐습니다.",
    "다음 주 금요일까지 보고서를 제출해야 합니다.",
    "데이터베이스 백업은 매일 새벽에 자동으로 실행됩니다.",
    "비가 와서 우리는 집에서 영화를 봤습니다.",
    "새 버전에서는 여러 가지 버그가 수정되었습니다.",
    "이 식당의 김치찌개는 아주 맛있기로 유명합니다.",
    "비밀번호는 정기적으로 변경하는 것이 좋습니다.",
    "어렸을 때 할머니 댁에서 강아지와 자주 놀았습니다.",
    "지하철이 늦게 와서 약속 시간에 늦었습니다.",
    "네트워크 설정을 바꾼 후에는 다시 시작해 주세요.",
    "봄이 되면 산에 꽃이 많이 피어서 아름답습니다.",
    "문의하신 내용을 확인한 후 담당자가 연락드리겠습니다.",
    "한국어를 배우는 외국인 학생이 점점 늘어나고 있습니다.",
    "캐시가 가득 차면 가장 오래된 항목이 삭제됩니다.",
    "주말에는 가족과 함께 바다에 갈 계획입니다.",
    "모든 테스트가 통과하면 운영 환경에 배포합니다.",
    "그 영화는 생각보다 훨씬 재미있었습니다.",
    "도서관은 아침 아홉 시에 문을 엽니다.",
    "우리 팀은 새로운 기능을 개발하느라 바쁩니다.",
    "커피를 너무 많이 마시면 잠을 잘 수 없습니다.",
    "최신 통계에 따르면 국내 인터넷 이용자는 사천만 명을 넘었습니다.",
    "이 함수는 문자열을 받아서 분석된 객체를 반환합니다.",
    "메모리 누수 때문에 서비스가 칠십이 시간 후에 멈춥니다.",
    "역사학자들은 이 성벽이 조선 시대 초기에 세워졌다고 봅니다.",
    "배포 스크립트는 이전 버전을 중지한 다음 새 버전을 시작합니다.",
    "연구진은 적당한 운동이 수면의 질을 크게 개선한다는 사실을 밝혀냈습니다.",
    "모든 API는 인증이 필요하며, 인증되지 않은 요청에는 401 오류를 반환합니다.",
    "한라산은 남한에서 가장 높은 산으로 높이가 약 천구백오십 미터입니다.",
    "설정 파일은 YAML 형식이며 기본 위치는 홈 디렉터리입니다.",
    "2024년 조사에서 Python은 가장 인기 있는 언어 중 하나였습니다.",
    "로그 수준은 디버그, 정보, 경고, 오류 중 하나로 설정할 수 있습니다.",
    "이 작가의 소설은 삼십 개가 넘는 언어로 번역되어 전 세계에서 읽히고 있습니다.",
    "요청 시간이 초과되면 클라이언트는 오 초 후에 다시 시도합니다.",
    "가을이 되면 설악산은 붉은 단풍으로 아름답게 물듭니다.",
    "회사의 매출은 작년에 비해 십오 퍼센트 증가했습니다.",
    "이용 약관에 동의한 후 계정을 만들어 주세요.",
)

_WORLDWIDE = (
    "Café au lait, s'il vous plaît — à côté de la fenêtre.",
    "Größere Änderungen benötigen eine Überprüfung durch zwei Kolleginnen.",
    "El niño comió una manzana en la estación de Córdoba.",
    "Быстрая коричневая лиса перепрыгнула через ленивую собаку.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Deploy finished ✅ with 3 warnings ⚠️ and no errors 🎉",
    "नमस्ते, आज मौसम बहुत अच्छा है।",
    "مرحبا بكم في المدينة القديمة",
)


def _half(items: tuple[str, ...] | list[str], split: str) -> list[str]:
    offset = 0 if split == TRAIN else 1
    return list(items[offset::2])


def _clauses(sentences: list[str]) -> list[str]:
    """Sentences cut after each comma, so that documents recombine clauses, not only sentences."""
    clauses: list[str] = []
    for sentence in sentences:
        clauses += [part + "，" for part in sentence.replace("、", "，").split("，")[:-1]]
        clauses.append(sentence.replace("、", "，").split("，")[-1])
    return clauses


class _Source:
    """The material one split may draw from, plus its random generator."""

    def __init__(self, split: str) -> None:
        self.rng = random.Random(_SEEDS[split])
        self.sentences = _half(_SENTENCES, split)
        self.words = _half(_WORDS, split)
        self.first = _half(_FIRST_NAMES, split)
        self.last = _half(_LAST_NAMES, split)
        self.cities = _half(_CITIES, split)
        self.cjk = {
            "zh": _clauses(_half(_CHINESE, split)),
            "ja": _clauses(_half(_JAPANESE, split)),
            "ko": _half(_KOREAN, split),
        }
        self.worldwide = _half(_WORLDWIDE, split)

    def sentence(self) -> str:
        return self.rng.choice(self.sentences)

    def paragraph(self, low: int = 2, high: int = 7) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(low, high)))

    def word(self) -> str:
        return self.rng.choice(self.words)

    def snake(self, parts: int = 2) -> str:
        return "_".join(self.word() for _ in range(parts))

    def camel(self, parts: int = 2) -> str:
        first, *rest = (self.word() for _ in range(parts))
        return first + "".join(w.capitalize() for w in rest)

    def person(self) -> str:
        return f"{self.rng.choice(self.first)} {self.rng.choice(self.last)}"

    def timestamp(self) -> str:
        r = self.rng
        return (
            f"20{r.randint(18, 26):02d}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T"
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
        )

    def uuid(self) -> str:
        hexits = f"{self.rng.getrandbits(128):032x}"
        return f"{hexits[:8]}-{hexits[8:12]}-{hexits[12:16]}-{hexits[16:20]}-{hexits[20:]}"

    def short_id(self, prefix: str) -> str:
        alphabet = string.ascii_lowercase + string.digits
        return prefix + "_" + "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(8, 16)))


# ---------------------------------------------------------------- JSON records


def _record(src: _Source) -> dict[str, Any]:
    r = src.rng
    first, last = src.person().split(" ")
    record: dict[str, Any] = {
        "id": r.choice([r.randint(1, 10**7), src.uuid(), src.short_id(src.word()[:3])]),
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower()}@example.{r.choice(['com', 'org', 'net'])}",
        "status": r.choice(["active", "pending", "suspended", "archived"]),
        "created_at": src.timestamp(),
        "score": round(r.uniform(0, 1000), r.randint(0, 4)),
        "verified": r.random() < 0.5,
        "tags": [src.word() for _ in range(r.randint(0, 4))],
    }
    if r.random() < 0.6:
        record["address"] = {
            "street": f"{r.randint(1, 999)} {src.word().capitalize()} Street",
            "city": r.choice(src.cities),
            "postal_code": f"{r.randint(1000, 99999)}",
        }
    if r.random() < 0.5:
        record["note"] = src.sentence()
    if r.random() < 0.3:
        record[src.snake()] = None
    for _ in range(r.randint(0, 3)):
        record[src.camel()] = r.choice([r.randint(0, 5000), src.word(), r.random() < 0.5])
    return record


def _records(src: _Source, low: int, high: int) -> list[dict[str, Any]]:
    return [_record(src) for _ in range(src.rng.randint(low, high))]


def _json_compact(src: _Source) -> str:
    payload: Any = _records(src, 1, 40)
    if src.rng.random() < 0.4:
        payload = {"results": payload, "next_cursor": src.short_id("cur"), "total": len(payload)}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def _json_indented(src: _Source) -> str:
    payload: Any = _records(src, 1, 25)
    if src.rng.random() < 0.4:
        payload = {"items": payload, "count": len(payload)}
    style = src.rng.random()
    if style < 0.6:
        return json.dumps(payload, indent=2, ensure_ascii=False)
    if style < 0.8:
        return json.dumps(payload, indent=4, ensure_ascii=False)
    return json.dumps(payload)  # Python's default ", " / ": " separators on one line


# ---------------------------------------------------------------- MCP tool definitions


def _tool(src: _Source) -> dict[str, Any]:
    r = src.rng
    properties: dict[str, Any] = {}
    for _ in range(r.randint(1, 6)):
        prop: dict[str, Any] = {"type": r.choice(["string", "integer", "boolean", "number", "array"])}
        prop["description"] = src.sentence()
        if prop["type"] == "array":
            prop["items"] = {"type": "string"}
        if prop["type"] == "string" and r.random() < 0.3:
            prop["enum"] = [src.word() for _ in range(r.randint(2, 5))]
        if prop["type"] == "integer" and r.random() < 0.4:
            prop["minimum"] = 0
            prop["maximum"] = r.choice([10, 100, 1000])
        properties[src.snake(r.randint(1, 2))] = prop
    tool: dict[str, Any] = {
        "name": src.snake(r.randint(2, 3)),
        "description": src.paragraph(1, 6),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": r.sample(sorted(properties), r.randint(0, len(properties))),
        },
    }
    if r.random() < 0.4:
        tool["annotations"] = {"readOnlyHint": r.random() < 0.5, "openWorldHint": r.random() < 0.5}
    if r.random() < 0.2:
        tool["title"] = " ".join(w.capitalize() for w in tool["name"].split("_"))
    return tool


def _tool_definitions(src: _Source) -> str:
    r = src.rng
    if r.random() < 0.5:
        tools: Any = _tool(src)  # one tool, as counted per definition
    else:
        tools = {"tools": [_tool(src) for _ in range(r.randint(2, 12))]}
    if r.random() < 0.65:
        return json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(tools, indent=2, ensure_ascii=False)


# ---------------------------------------------------------------- prose


def _prose(src: _Source) -> str:
    r = src.rng
    paragraphs = [src.paragraph() for _ in range(r.randint(1, 8))]
    if r.random() < 0.3:
        paragraphs.insert(0, " ".join(w.capitalize() for w in (src.word() for _ in range(3))))
    if r.random() < 0.15:  # licences and terms shout their disclaimers
        paragraphs.append(src.paragraph(1, 3).upper())
    return "\n\n".join(paragraphs)


# ---------------------------------------------------------------- source code


def _python_function(src: _Source, indent: str = "") -> str:
    r = src.rng
    name = src.snake(r.randint(1, 3))
    args = [src.word() for _ in range(r.randint(0, 4))]
    hints = ", ".join(
        f"{a}: {r.choice(['str', 'int', 'list[str]', 'dict[str, Any]', 'float | None'])}" for a in args
    )
    local = src.word() + "_total"
    lines = []
    if r.random() < 0.3:
        lines.append(
            f"@{r.choice(['property', 'staticmethod', 'functools.lru_cache(maxsize=128)', 'pytest.fixture'])}"
        )
    lines += [
        f"def {name}({hints}) -> {r.choice(['int', 'None', 'str', 'bool'])}:",
        f'    """{src.sentence()}',
    ]
    if r.random() < 0.5:
        lines += ["", f"    {src.sentence()}", f"    {src.sentence()}"]
    lines += ['    """', f"    {local} = 0"]
    for arg in args:
        lines.append(f"    if {arg} is None:")
        lines.append(f'        raise ValueError(f"{arg} must not be None, got {{{arg}!r}}")')
        lines.append(f"    {local} += len({arg}) * {r.randint(2, 99)}")
    if r.random() < 0.6:
        lines.append(f"    # {src.sentence()}")
    lines.append(f"    for index, {src.word()}_item in enumerate(self.{src.snake()}):")
    lines.append(f"        {local} += index % {r.randint(2, 9)}")
    lines.append(f"        logger.debug('%s: %d', {src.word()!r}, {local})")
    lines.append(f"    return {{'{src.word()}': {local}, \"{src.word()}\": {r.random() < 0.5}}}")
    return "\n".join(indent + line if line else line for line in lines)


def _python_table(src: _Source) -> str:
    """Module-level lists and dicts: long runs of aligned indentation, as in real modules."""
    r = src.rng
    name = src.word().upper()
    if r.random() < 0.5:
        pad = " " * r.randint(4, 16)
        items = ",\n".join(f"{pad}{src.snake(r.randint(1, 2))!r}" for _ in range(r.randint(3, 20)))
        return f"__all__ = [\n{items},\n]" if r.random() < 0.5 else f"{name}_NAMES = (\n{items},\n)"
    width = r.randint(12, 28)
    rows = ",\n".join(
        f"    {src.word()!r}:{' ' * r.randint(1, width // 2)}"
        f"{r.choice([r.randint(0, 9999), src.word(), None])!r}"
        for _ in range(r.randint(3, 15))
    )
    return f"{name}_DEFAULTS = {{\n{rows},\n}}"


def _python_module(src: _Source) -> str:
    r = src.rng
    header = [
        f'"""{src.sentence()}"""',
        "",
        "from __future__ import annotations",
        "",
        *(f"import {m}" for m in r.sample(["os", "json", "re", "time", "logging", "functools"], 3)),
        f"from typing import {r.choice(['Any', 'Optional', 'Iterable'])}",
        "",
        "logger = logging.getLogger(__name__)",
        f"{src.word().upper()}_{src.word().upper()} = {r.randint(1, 65536)}",
        "",
    ]
    body: list[str] = []
    for _ in range(r.randint(1, 6)):
        roll = r.random()
        if roll < 0.3:
            cls = "".join(w.capitalize() for w in (src.word(), src.word()))
            methods = "\n\n".join(_python_function(src, "    ") for _ in range(r.randint(1, 3)))
            body.append(f'class {cls}:\n    """{src.sentence()}"""\n\n{methods}\n')
        elif roll < 0.45:
            body.append(_python_table(src) + "\n")
        else:
            body.append(_python_function(src) + "\n")
    return "\n".join(header) + "\n\n".join(body)


def _js_function(src: _Source, unit: str) -> str:
    r = src.rng
    name = src.camel(r.randint(1, 3))
    args = [src.word() for _ in range(r.randint(0, 3))]
    obj = src.camel()
    lines = [
        "/**",
        f" * {src.sentence()}",
        *(
            f" * @param {{{r.choice(['string', 'number', 'Object'])}}} {a} {src.sentence()[:50].rstrip()}"
            for a in args
        ),
        " */",
        f"export async function {name}({', '.join(args)}) {{",
        f"{unit}const {obj} = await fetch(`/api/{src.word()}/${{{args[0] if args else 'id'}}}`);",
        f"{unit}if (!{obj}.ok) {{",
        f"{unit}{unit}throw new Error('{src.sentence()[:40].rstrip()}');",
        f"{unit}}}",
        f"{unit}const data = await {obj}.json();",
        f"{unit}return data.{src.word()}.filter((x) => x.{src.camel()} > {r.randint(0, 500)})"
        f".map((x) => ({{ ...x, {src.word()}: x.{src.word()} ?? null }}));",
        "}",
    ]
    return "\n".join(lines)


def _js_class(src: _Source, unit: str) -> str:
    r = src.rng
    cls = "".join(w.capitalize() for w in (src.word(), src.word()))
    fields = [src.camel() for _ in range(r.randint(1, 4))]
    lines = [
        f"export class {cls} extends EventEmitter {{",
        f"{unit}constructor(options = {{}}) {{",
        f"{unit * 2}super();",
    ]
    lines += [
        f"{unit * 2}this.{f} = options.{f} ?? {r.choice(['null', '0', '[]', repr(src.word())])};"
        for f in fields
    ]
    lines += [
        f"{unit}}}",
        "",
        f"{unit}get {src.camel()}() {{",
        f"{unit * 2}return this.{fields[0]};",
        f"{unit}}}",
        "}",
    ]
    return "\n".join(lines)


def _code(src: _Source) -> str:
    r = src.rng
    if r.random() < 0.5:
        return _python_module(src)
    unit = r.choice(["  ", "    ", "\t"])
    parts = [
        f"import {{ {src.camel()} }} from './{src.word()}.js';",
        "import { EventEmitter } from 'events';",
        "",
    ]
    for _ in range(r.randint(1, 6)):
        parts.append((_js_class if r.random() < 0.3 else _js_function)(src, unit) + "\n")
    return "\n".join(parts)


def _minified_js(src: _Source) -> str:
    r = src.rng
    short = [a + b for a in string.ascii_letters for b in ("", *string.ascii_letters[:6])]
    out: list[str] = ["!function(){"]
    for _ in range(r.randint(5, 120)):
        a, b, c = (r.choice(short) for _ in range(3))
        prop = src.camel(r.randint(1, 2))
        out.append(
            r.choice(
                [
                    f"var {a}={b}.{prop}||{{}};",
                    f"function {a}({b},{c}){{return {b}.{prop}({c},{r.randint(0, 999)})}}",
                    f'{a}.prototype.{prop}=function({b}){{this.{src.word()}="{src.word()}"+{b}}};',
                    f"if({a}&&{a}.length>{r.randint(1, 64)}){{{b}=[{a}[0],{r.random():.3f}]}}",
                    f'{a}("{src.word()}-{src.word()}",function({b}){{{c}.push({b}.{prop})}});',
                ]
            )
        )
    out.append("}();")
    return "".join(out)


# ---------------------------------------------------------------- CJK


def _cjk_sentence(src: _Source, language: str) -> str:
    r = src.rng
    pool = src.cjk[language]
    if language == "ko":
        return r.choice(pool)
    text = "".join(r.choice(pool) for _ in range(r.randint(1, 3)))
    if text[-1] == "，":
        text = text[:-1] + r.choice("。！？")
    return text


def _cjk(src: _Source) -> str:
    r = src.rng
    language = r.choice(["zh", "ja", "ko"])
    joiner = " " if language == "ko" else ""
    paragraphs: list[str] = []
    for _ in range(r.randint(1, 8)):
        sentences = [_cjk_sentence(src, language) for _ in range(r.randint(1, 8))]
        if r.random() < 0.25:  # product names, versions and numbers appear in CJK text too
            sentences.insert(r.randrange(len(sentences)), f" {src.word().capitalize()} {r.randint(1, 2025)} ")
        paragraphs.append(joiner.join(sentences))
    text = "\n".join(paragraphs)
    if r.random() < 0.3:  # plain-text CJK is often hard-wrapped mid-phrase
        width = r.randint(20, 40)
        text = "\n".join(line[i : i + width] for line in text.split("\n") for i in range(0, len(line), width))
    return text


# ---------------------------------------------------------------- base64


def _base64(src: _Source) -> str:
    r = src.rng
    blob = r.randbytes(r.choice([r.randint(48, 600), r.randint(600, 20000)]))
    style = r.random()
    if style < 0.4:
        return base64.b64encode(blob).decode()
    if style < 0.6:
        return base64.encodebytes(blob).decode()  # MIME: 76 characters per line
    if style < 0.7:
        return base64.urlsafe_b64encode(blob).decode().rstrip("=")
    block = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(blob).decode()}
    return json.dumps(block, separators=(",", ":"))


# ---------------------------------------------------------------- numbers


def _numbers(src: _Source) -> str:
    r = src.rng
    style = r.random()
    rows = r.randint(5, 200)
    if style < 0.3:
        header = "id,timestamp,value,latitude,longitude,count"
        lines = [
            f"{r.randint(10**5, 10**9)},{src.timestamp()},{r.uniform(-1e4, 1e4):.4f},"
            f"{r.uniform(-90, 90):.6f},{r.uniform(-180, 180):.6f},{r.randint(0, 99999)}"
            for _ in range(rows)
        ]
        return "\n".join([header, *lines])
    if style < 0.5:
        return json.dumps([r.randint(0, 10**12) if r.random() < 0.5 else r.random() for _ in range(rows)])
    if style < 0.7:
        return "\n".join(
            f"{src.timestamp()} {r.randint(1, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}."
            f"{r.randint(0, 255)} {r.choice(['GET', 'POST'])} {r.randint(200, 504)} {r.randint(1, 99999)}ms"
            for _ in range(rows)
        )
    if style < 0.85:
        return "\n".join(
            f"{src.uuid()} {r.getrandbits(160):040x} +{r.randint(1, 99)} {r.randint(100, 999)} "
            f"{r.randint(1000000, 9999999)}"
            for _ in range(rows)
        )
    series = [
        {"t": r.randint(1_600_000_000, 1_800_000_000), "v": round(r.gauss(50, 20), 3)} for _ in range(rows)
    ]
    return json.dumps(series, separators=(",", ":"))


# ---------------------------------------------------------------- mixed


def _mixed(src: _Source) -> str:
    r = src.rng
    parts = [f"# {src.word().capitalize()} {src.word()} report", "", src.paragraph()]
    makers: list[Callable[[_Source], str]] = [
        lambda s: "```python\n" + _python_function(s) + "\n```",
        lambda s: "```json\n" + json.dumps(_record(s), indent=2, ensure_ascii=False) + "\n```",
        lambda s: (
            "| id | value | when |\n|---|---|---|\n"
            + "\n".join(
                f"| {s.rng.randint(1, 999)} | {s.rng.random():.3f} | {s.timestamp()} |" for _ in range(5)
            )
        ),
        lambda s: s.paragraph(),
        lambda s: s.rng.choice(s.worldwide),
        lambda s: _cjk_sentence(s, s.rng.choice(["zh", "ja", "ko"])),
        lambda s: "- " + "\n- ".join(s.sentence() for _ in range(s.rng.randint(2, 5))),
        lambda s: (
            f"```sql\nSELECT {s.word()}, {s.word()} FROM {s.word()}s WHERE {s.word()} = '{s.word()}'"
            f" AND {s.word()}_ID > {s.rng.randint(1, 9999)} ORDER BY {s.word().upper()} DESC LIMIT 50;\n```"
        ),
        lambda s: "Attachment: " + base64.b64encode(s.rng.randbytes(s.rng.randint(30, 400))).decode(),
    ]
    for _ in range(r.randint(2, 8)):
        parts += ["", r.choice(makers)(src)]
    return "\n".join(parts)


_MAKERS: dict[str, Callable[[_Source], str]] = {
    "json_compact": _json_compact,
    "json_indented": _json_indented,
    "tool_definitions": _tool_definitions,
    "prose": _prose,
    "code": _code,
    "minified_js": _minified_js,
    "cjk": _cjk,
    "base64": _base64,
    "numbers": _numbers,
    "mixed": _mixed,
}


def corpus(split: str, per_kind: int = 40) -> dict[str, list[str]]:
    """`per_kind` documents of every kind in `KINDS`, from the material of `split`."""
    if split not in _SEEDS:
        raise ValueError(f"split must be {TRAIN!r} or {VALIDATION!r}, got {split!r}")
    src = _Source(split)
    return {kind: [_MAKERS[kind](src) for _ in range(per_kind)] for kind in KINDS}

use super::*;

fn texts(prompt: &str) -> Vec<String> {
    extract(prompt).into_iter().map(|f| f.text).collect()
}

fn subject_of(prompt: &str) -> Option<String> {
    extract(prompt).into_iter().next().and_then(|f| f.subject)
}

#[test]
fn statements_of_one_subject_are_one_fact() {
    assert_eq!(
        texts("エディタはずっとVS Code派です。Vimは挫折しました笑"),
        ["エディタはずっとVS Code派です。Vimは挫折しました"]
    );
    assert_eq!(
        texts("最近HHKBのType-Sを買いました！打鍵感が最高です。"),
        ["最近HHKBのType-Sを買いました。打鍵感が最高です"]
    );
    assert_eq!(
        texts("I drive a Subaru Outback. My wife has a Prius."),
        ["I drive a Subaru Outback", "My wife has a Prius"]
    );
}

#[test]
fn a_fact_before_a_question_in_one_sentence_is_kept() {
    assert_eq!(
        texts("札幌の北区に住んでるんだけど、冬の雪かきが本当につらい…何か楽にする方法ある？"),
        ["札幌の北区に住んでる"]
    );
    assert_eq!(
        texts(
            "私は東京生まれなんですが、今は名古屋の会社で働いています。名古屋でおすすめのモーニングのお店ってありますか？"
        ),
        ["私は東京生まれ", "今は名古屋の会社で働いています"]
    );
    assert_eq!(
        texts("I've got a Pixel 7 Pro and the battery drains really fast lately, any tips?"),
        ["I've got a Pixel 7 Pro and the battery drains really fast lately"]
    );
    assert_eq!(
        texts("Mum's birthday is 2 February. Remind me to call her."),
        ["Mum's birthday is 2 February"]
    );
    assert_eq!(
        texts("実家は長野の松本なんです。"),
        ["実家は長野の松本なんです"]
    );
    assert_eq!(
        texts(
            "うちのプリンター、ブラザーのMFC-J905Nなんだけど、最近紙詰まりするんだよね。何が原因だろう？"
        ),
        ["うちのプリンター、ブラザーのMFC-J905N。最近紙詰まりするんだよね"]
    );
    assert_eq!(
        texts("Maisie, my youngest, is nine and loves horses. Are riding lessons a good idea?"),
        ["Maisie, my youngest, is nine and loves horses"]
    );
}

#[test]
fn the_seeds_cat_is_a_fact_and_the_request_is_not() {
    assert_eq!(
        texts("私の猫の名前はミケです。覚えておいてね。"),
        ["私の猫の名前はミケです"]
    );
    assert_eq!(
        texts("私の猫の名前はミケです、覚えておいてね"),
        ["私の猫の名前はミケです"]
    );
    assert!(texts("私の猫の名前は何でしたっけ？").is_empty());
    assert!(texts("私の猫の名前は何でしたっけ").is_empty());
    assert!(texts("猫の餌は何がいいですか").is_empty());
    assert!(texts("カレーのレシピを教えて").is_empty());
    assert!(texts("この文章を英語に訳してくれる").is_empty());
    assert_eq!(
        texts("仕事でRustを使ってサーバーを書いています"),
        ["仕事でRustを使ってサーバーを書いています"]
    );
    assert!(texts("ありがとう、助かりました！").is_empty());
    assert!(texts("明日の会議は何時からですか").is_empty());
}

#[test]
fn japanese_statements_without_a_pronoun_are_facts() {
    assert_eq!(texts("出身は北海道の旭川です"), ["出身は北海道の旭川です"]);
    assert_eq!(
        texts("車は青いプリウスに乗っています"),
        ["車は青いプリウスに乗っています"]
    );
    assert_eq!(
        texts("ちなみに、うちのNASはSynologyのDS920+です。バックアップの方法を教えて。"),
        ["うちのNASはSynologyのDS920+です"]
    );
}

#[test]
fn english_statements_questions_and_requests() {
    assert_eq!(texts("My cat's name is Mike."), ["My cat's name is Mike"]);
    assert_eq!(
        texts("I have a Synology DS920+ at home. How do I back it up to the cloud?"),
        ["I have a Synology DS920+ at home"]
    );
    assert_eq!(
        texts("btw, remember that I'm allergic to peanuts"),
        ["I'm allergic to peanuts"]
    );
    assert_eq!(
        texts("I live in Osaka and my wife works in Kobe."),
        ["I live in Osaka", "my wife works in Kobe"]
    );
    assert!(texts("What's my cat's name again?").is_empty());
    assert!(texts("Can you recommend a GPU for my desktop").is_empty());
    assert!(texts("Tell me about my sourdough recipe").is_empty());
    assert!(texts("Thanks, that helped a lot!").is_empty());
    assert!(
        texts("The weather is nice today.").is_empty(),
        "not about the person"
    );
    assert!(texts("I think so").is_empty());
}

#[test]
fn subjects_key_single_valued_things() {
    assert_eq!(subject_of("I live in Kashiwa"), Some("home".into()));
    assert_eq!(
        subject_of("I moved to Osaka last month"),
        Some("home".into())
    );
    assert_eq!(subject_of("My cat's name is Mike"), Some("cat name".into()));
    assert_eq!(subject_of("My cat is called Tama"), Some("cat name".into()));
    assert_eq!(
        subject_of("My router is a NEC Aterm"),
        Some("router".into())
    );
    assert_eq!(
        subject_of("I replaced my router with a TP-Link Deco"),
        Some("router".into())
    );
    assert_eq!(
        subject_of("My favorite food is sushi"),
        Some("favorite food".into())
    );
    assert_eq!(
        subject_of("I'm allergic to peanuts"),
        None,
        "allergies add up"
    );
    assert_eq!(subject_of("My wife is a teacher"), Some("wife job".into()));
    assert_eq!(
        subject_of("My wife is Japanese"),
        None,
        "a person is many things"
    );
    assert_eq!(
        subject_of("私の猫の名前はミケです"),
        Some("猫の名前".into())
    );
    assert_eq!(subject_of("柏市に住んでいます"), Some("home".into()));
    assert_eq!(subject_of("先月大阪に引っ越しました"), Some("home".into()));
    assert_eq!(
        subject_of("うちのルーターはNECのAtermです"),
        Some("router".into())
    );
    assert_eq!(
        subject_of("ルーターをTP-LinkのDecoに買い替えました"),
        Some("router".into())
    );
    assert_eq!(subject_of("私はそばアレルギーがあります"), None);
}

#[test]
fn small_talk_asks_for_no_memory() {
    assert!(small_talk("lol nice"));
    assert!(small_talk("Thanks, that helped a lot!"));
    assert!(small_talk("ありがとう、助かりました！"));
    assert!(small_talk("おはようございます"));
    assert!(!small_talk("what is my cat called?"));
    assert!(!small_talk("ありがとう、猫の名前は？"));
}

#[test]
fn facts_are_keyed_without_punctuation_or_case() {
    assert_eq!(
        fact_key("My cat's name is Mike."),
        fact_key("my cats name is mike")
    );
    assert_eq!(
        fact_key("私の猫の名前はミケです。"),
        fact_key("私の猫の名前はミケです")
    );
}

#[test]
fn a_long_message_gives_at_most_max_facts() {
    let prompt = (0..20)
        .map(|i| format!("My item {i} is here."))
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(extract(&prompt).len(), MAX_FACTS);
}

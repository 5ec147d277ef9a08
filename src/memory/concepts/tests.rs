use super::*;

fn names(text: &str) -> Vec<&'static str> {
    mentioned(text).into_iter().map(name).collect()
}

#[test]
fn every_concept_has_a_bit() {
    assert!(
        CONCEPTS.len() < 128,
        "{} concepts do not fit a Mask",
        CONCEPTS.len()
    );
    let names: std::collections::HashSet<&str> = CONCEPTS.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), CONCEPTS.len(), "concept names are unique");
    for c in CONCEPTS {
        assert!(c.broader.is_none_or(|b| names.contains(b)), "{}", c.name);
    }
}

#[test]
fn paraphrases_meet_in_a_concept() {
    assert!(names("What's my boy's name again?").contains(&"son"));
    assert!(names("My son Leo started school").contains(&"son"));
    assert!(names("いまうちで使ってるWi-Fiの機械は？").contains(&"router"));
    assert!(names("結局ルーターをTP-LinkのDecoに買い替えました").contains(&"router"));
    assert!(names("What kind of vehicle do I drive?").contains(&"car"));
    assert!(names("私のスマホはPixel 8です").contains(&"phone"));
    assert!(names("Our beagle Baxter barks").contains(&"dog"));
    assert!(names("Our beagle Baxter barks").contains(&"pet"), "broader");
    assert!(!names("I like cosplay").contains(&"os"), "whole words only");
    assert!(
        !names("大丈夫です").contains(&"husband"),
        "masked compounds"
    );
    assert!(!names("電車で通っています").contains(&"car"));
    assert!(names("祖母の誕生日").contains(&"grandparent"));
    assert!(!names("祖母の誕生日").contains(&"mother"));
}

#[test]
fn a_question_about_another_pet_or_person_is_not_compatible() {
    let dog = mentioned("うちの犬の名前って何だっけ？");
    let cat = mentioned("私の猫の名前はミケです");
    assert!(!compatible(&dog, &cat));
    assert!(compatible(&cat, &cat));
    let wife = mentioned("妻の誕生日っていつだった？");
    assert!(!compatible(&wife, &mentioned("私の誕生日は3月14日です")));
    assert!(compatible(
        &mentioned("What's my kid's name?"),
        &mentioned("My daughter is Emma")
    ));
    assert!(compatible(
        &mentioned("When is my birthday?"),
        &mentioned("My birthday is March 14")
    ));
    assert!(!compatible(
        &mentioned("What kind of tea do I like?"),
        &mentioned("I take my coffee black")
    ));
    assert!(!compatible(
        &mentioned("うちのハムスターの名前は？"),
        &mentioned("うさぎを飼い始めました")
    ));
    assert!(compatible(
        &mentioned("What do I like to drink?"),
        &mentioned("I take my coffee black")
    ));
}

#[test]
fn a_question_about_two_pets_may_get_the_memory_of_either() {
    let both = mentioned("What are my cat and my dog called?");
    assert!(compatible(&both, &mentioned("My cat is called Tama")));
    assert!(compatible(&both, &mentioned("My dog is called Max")));
    assert!(!compatible(&both, &mentioned("My hamster is called Pip")));
    let ja = mentioned("うちの猫と犬の名前は何だっけ？");
    assert!(compatible(&ja, &mentioned("私の猫の名前はミケです")));
    assert!(compatible(&ja, &mentioned("私の犬の名前はポチです")));
}

#[test]
fn a_memory_on_another_topic_is_off_topic() {
    let laptop = mentioned("ノートパソコンのメモリって何GB積んでたっけ？");
    assert!(off_topic(
        &laptop,
        &mentioned("デスクトップにRTX 4070を積んでる")
    ));
    assert!(!off_topic(&laptop, &mentioned("ノートはMacBook Airです")));
    assert!(
        !off_topic(&laptop, &mentioned("肩こりがひどいです")),
        "no topic: no verdict"
    );
    assert!(off_topic(
        &mentioned("What does my wife do for work?"),
        &mentioned("My wife's name is Priya")
    ));
}

#[test]
fn single_valued_subjects() {
    let subject_of = |t: &str| subject(&mentioned(t));
    assert_eq!(
        subject_of("I drive a 2012 Subaru Outback").as_deref(),
        Some("car")
    );
    assert_eq!(
        subject_of("家族が増えたので、フィットを手放してスバルのフォレスターに乗り換えました")
            .as_deref(),
        Some("car")
    );
    assert_eq!(
        subject_of("My wife drives a Prius").as_deref(),
        Some("wife car")
    );
    assert_eq!(
        subject_of("My rig has a Ryzen 9 and an RTX 4080"),
        None,
        "several things"
    );
    assert_eq!(
        subject_of("My home server is on Ubuntu 20.04").as_deref(),
        Some("server os")
    );
    assert_eq!(
        subject_of("Wiped the home server and reinstalled it with NixOS").as_deref(),
        Some("server os")
    );
    assert_eq!(subject_of("I love jazz"), None, "tastes add up");
}

fn main() {
    println!("tandem skeleton");
}
